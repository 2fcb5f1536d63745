package reboot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Status.LastPress (review 36 finding 2) makes a restarted controller wait
// out a press that may still be in effect; once the press's shutdown is
// over and settled it is cleared, so a restart long after a completed
// reboot does not hold up the next soft request (nor turn it hard at
// SoftTimeout).
func TestReview36_LastPressClearedOnceSettled(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second, Lag: time.Second}, reboot.Host{Online: true})
	a := &reboot.Client{Hosts: w.store, Key: "a", Now: w.clk.Now}
	tkA, err := a.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	require.True(t, w.follow(t, 2*time.Minute, func() bool {
		f, err := a.Fenced(w.ctx, tkA)
		require.NoError(t, err)
		return f
	}), "A fenced")
	require.False(t, w.host(t).Status.LastPress.IsZero(), "the press was persisted before it was sent")
	require.NoError(t, a.Release(w.ctx, tkA))
	w.follow(t, 2*time.Minute, func() bool { return false })
	require.True(t, w.pw.HardwareOn())
	require.True(t, w.host(t).Status.LastPress.IsZero(), "LastPress cleared once the press settled")

	w.r = w.reconciler() // restart
	b := &reboot.Client{Hosts: w.store, Key: "b", Now: w.clk.Now}
	_, err = b.Request(w.ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := w.clk.Real()
	w.follow(t, time.Minute, func() bool { return false })
	// A restarted controller does not know its predecessor's power-ons:
	// StaleReads from the restart (QuietFor), not SoftTimeout+StaleReads.
	var first *fake.Call
	for _, c := range w.pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(start) {
			first = &c
			break
		}
	}
	require.NotNil(t, first, "soft power-off sent after the restart; calls %v", offCalls(w.pw, start))
	require.Equal(t, power.ModeSoft, first.Mode)
	require.LessOrEqual(t, first.At.Sub(start), reboot.DefaultConfig().StaleReads+time.Second)
}
