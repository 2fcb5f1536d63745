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

// TestReview36r_DoneRebootStaysDoneWhenClockBehindPowerOn: a reboot whose
// power-on was decided (LastPoweredOn after PendingRebootSince) read by a
// pass whose clock is behind LastPoweredOn (a correction, or a jump back)
// stays done: the repair clamps LastPoweredOn to the clock and must not
// make it tie with PendingRebootSince, which made the reboot pending again
// with its evidence dropped and powered the host off a second time.
func TestReview36r_DoneRebootStaysDoneWhenClockBehindPowerOn(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, back := range []time.Duration{time.Second, 4 * time.Second, 10 * time.Second} {
		st := reboot.Status{PendingRebootSince: t0, LastRequestSeen: t0, LastPoweredOff: t0.Add(2 * time.Second),
			LastPoweredOn: t0.Add(5 * time.Second), Mode: power.ModeSoft, Works: 1, Format: reboot.StatusFormat}
		require.False(t, st.Pending(), "the setup: the reboot is done")
		now := st.LastPoweredOn.Add(-back)
		for _, pw := range []power.State{power.StateOff, power.StateOn, power.StateUnknown} {
			d := reboot.DefaultConfig().Decide(reboot.Observed{Online: true, Power: pw, Status: st,
				QuietFor: time.Minute, OffFor: time.Minute, SincePending: time.Minute, SinceRequest: time.Minute}, now)
			require.NotEqual(t, reboot.ActionPowerOff, d.Power, "clock %v behind the power-on, read %v: %s", back, pw, d.Reason)
			require.False(t, d.Status.Pending(), "clock %v behind the power-on, read %v: the done reboot is pending again: %+v", back, pw, d.Status)
			require.False(t, d.Status.LastPoweredOn.After(now), "never a timestamp ahead of the clock")
			require.False(t, d.Status.Fenced(t0.Add(-time.Second), now.Add(time.Hour)) && d.Status.LastPoweredOff.After(now),
				"evidence later than the clock is not kept")
		}
	}
}

// TestReview36r_ClockJumpBackAfterKeyedRebootCyclesOnce: a keyed reboot is
// answered and released, the power-on is sent, and then the wall clock
// jumps back by two minutes (no correction follows): one request, one
// power cycle, checked against the fake hardware's truth.
func TestReview36r_ClockJumpBackAfterKeyedRebootCyclesOnce(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{Stale: time.Second}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(),
		Power: func(string) (power.Controller, error) { return pw, nil }}
	clk.Advance(time.Minute)
	step := func() reboot.Result {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(min(max(res.RequeueAfter, 100*time.Millisecond), time.Second))
		return res
	}
	for i := 0; i < 3; i++ {
		step()
	}
	cl := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	fenced := false
	for i := 0; i < 300 && !fenced; i++ {
		step()
		fenced, err = cl.Fenced(ctx, tk)
		require.NoError(t, err)
	}
	require.True(t, fenced, "the setup: fenced")
	clk.Advance(20 * time.Second) // held a while: LastPoweredOn well after PendingRebootSince
	require.NoError(t, cl.Release(ctx, tk))
	on := false
	for i := 0; i < 100 && !on; i++ {
		on = step().Decision.Power == reboot.ActionPowerOn
	}
	require.True(t, on, "the setup: the power-on was sent")
	clk.Jump(-2 * time.Minute)
	for i := 0; i < 600; i++ {
		step()
	}
	offs := 0
	for _, tc := range pw.Truth() {
		if !tc.On {
			offs++
		}
	}
	require.Equal(t, 1, offs, "one request, but the host was powered off %d times; truth %s", offs, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn())
}
