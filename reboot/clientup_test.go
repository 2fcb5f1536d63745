package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestUpIsHostReadsOn (issue 40, point 8): Done turns true once the
// power-on is decided, while the hardware (ground truth) is still off (the
// BMC failed the first power-on; it reports the old state for 8 s); Up
// turns true
// only once the host reads On in a reading that cannot echo the state
// from before the power-on, and the hardware is on then. Before, Done was
// the only answer.
func TestUpIsHostReadsOn(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: 5 * time.Second, Report: fake.Report{Stale: 8 * time.Second}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	pc := func(string) (power.Controller, error) { return hw, nil }
	r := &reboot.Reconciler{Hosts: store, Power: pc, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.Config{StaleReads: 10 * time.Second}}
	c := &reboot.Client{Hosts: store, Key: "k", Now: clk.Now, Power: pc, StaleReads: 10 * time.Second}
	hw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultFailed})
	tk, err := c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	_, err = c.Up(ctx, tk)
	require.NoError(t, err)
	var doneAt, upAt time.Time
	offAtDone := false
	for i := 0; i < 300 && upAt.IsZero(); i++ {
		_, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		if f, _ := c.Fenced(ctx, tk); f {
			require.NoError(t, c.Release(ctx, tk))
		}
		if d, _ := c.Done(ctx, tk); d && doneAt.IsZero() {
			doneAt, offAtDone = clk.Real(), !hw.HardwareOn()
		}
		up, err := c.Up(ctx, tk)
		require.NoError(t, err)
		if up {
			upAt = clk.Real()
			assert.True(t, hw.HardwareOn(), "Up while the hardware is off (truth %v)", hw.Truth())
		}
		clk.Advance(time.Second)
	}
	require.False(t, doneAt.IsZero(), "never done")
	require.False(t, upAt.IsZero(), "never up")
	assert.True(t, offAtDone, "Done turned true while the hardware was on: the test shows nothing")
	assert.True(t, upAt.After(doneAt))
	_, err = (&reboot.Client{Hosts: store, Key: "k", Now: clk.Now}).Up(ctx, tk)
	assert.ErrorIs(t, err, reboot.ErrNoPower)
}
