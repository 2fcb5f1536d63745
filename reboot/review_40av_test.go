package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// setup40av drives host h to Online=false known off with a power-on
// decided just before Online=false and never confirmed (the record
// TestReview40as_UnconfirmedPowerOnThenOnlineFalseNeverForgotten builds),
// with a first controller (no Guard).
func setup40av(t *testing.T, unconfirmed bool) (*fake.Clock, *fake.Power, *fake.RebootHosts) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, SoftDelay: 10 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	if !unconfirmed {
		loop40aq(t, rec, clk, clk.Real().Add(2*time.Minute), start)
	} else {
		for i := 0; ; i++ {
			require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
			res, err := rec.Reconcile(ctx, "h")
			require.NoError(t, err)
			if res.Decision.Power == reboot.ActionPowerOn {
				break
			}
			clk.Advance(time.Second)
		}
		clk.Advance(time.Second)
	}
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, clk.Real().Add(10*time.Minute), start)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, !pw.HardwareOn() && !h.Status.OfflineSince.IsZero() && !h.Status.OfflineOffSeen.IsZero(),
		"setup: Online=false enforced, known off; %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.Equal(t, unconfirmed, !h.Status.OnConfirmed.Equal(h.Status.LastPoweredOn), "setup: power-on unconfirmed %v; %+v", unconfirmed, h.Status)
	return clk, pw, store
}

func standby40av(t *testing.T, unconfirmed bool) (bool, reboot.Next, reboot.Status) {
	ctx := context.Background()
	clk, pw, store := setup40av(t, unconfirmed)
	g := &guard40ao{}
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(), Guard: g,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	held, last := runLoop40as(t, rec2.Loop(func(context.Context) ([]string, error) { return nil, nil }), clk, 30*time.Minute)
	require.False(t, pw.HardwareOn(), "truth: off; %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	return held, last, h.Status
}

// TestReview40av_StandbyForgetsConfirmedOnlineFalseOffHost (passing,
// control for the test above): the same standby forgets the same host
// whose power-on was confirmed before Online=false.
func TestReview40av_StandbyForgetsConfirmedOnlineFalseOffHost(t *testing.T) {
	held, last, st := standby40av(t, false)
	require.False(t, held, "standby still holds an idle host 30 min later (last Next %+v; status %+v)", last, st)
}
