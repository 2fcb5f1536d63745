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

// iloSettled returns a Reconciler over an iLO-like fake (soft = press,
// hard = ForceOff) whose host runs, settled and idle, and its clock.
func iloSettled(t *testing.T, h reboot.Host) (*reboot.Reconciler, *fake.Power, *fake.RebootHosts, *fake.Clock) {
	t.Helper()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(h)
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(),
		Power: func(string) (power.Controller, error) { return pw, nil }}
	clk.Advance(time.Minute)
	for i := 0; i < 5; i++ {
		res, err := rec.Reconcile(context.Background(), h.Name)
		require.NoError(t, err)
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.True(t, pw.HardwareOn())
	return rec, pw, store, clk
}

// reconcileUntil runs passes of rec as it asks until end, and at least
// every step (passes triggered by watch events), calling at before each.
func reconcileUntil(t *testing.T, rec *reboot.Reconciler, clk *fake.Clock, end time.Time, step time.Duration, at func(time.Time)) {
	t.Helper()
	for clk.Real().Before(end) {
		if at != nil {
			at(clk.Real())
		}
		res, err := rec.Reconcile(context.Background(), "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real(), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		clk.Advance(max(min(next, step), time.Millisecond))
	}
}

// TestReview36p_LostSoftPressOnlineFalseHardFallbackWaitsLanding: the
// Online=false fallback to hard (OfflineSince + SoftTimeout) is a
// power-off that sets the power: sent while a lost soft press may still
// land, the press lands on the host that is off and powers it on while
// Online is false. It waits until the press has landed (landWait).
func TestReview36p_LostSoftPressOnlineFalseHardFallbackWaitsLanding(t *testing.T) {
	rec, pw, store, clk := iloSettled(t, reboot.Host{Name: "h", Online: true})
	clk.Advance(time.Duration(1e9-clk.Real().Nanosecond()%1e9) + 500*time.Millisecond)
	landing := reboot.LostLandingOf(rec.Config) - 100*time.Millisecond
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: landing})
	offlineAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	reconcileUntil(t, rec, clk, offlineAt.Add(10*time.Minute), time.Second, nil)
	offAt, tc, on := review36OffThenOn(pw, offlineAt, false)
	if on {
		t.Fatalf("Online=false: the host went off at %v and was powered on at %v (%v) by the lost soft press landing after the hard fallback; truth %s",
			offAt.Sub(offlineAt), tc.At.Sub(offlineAt), tc.Cause, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview36p_LostPressHeldHostReadOnWaitsLanding: a held host read on
// (powered on by someone else) is powered off hard at once; sent while
// this controller's lost soft press may still land, the press lands on the
// host that is off by then and powers it on while the keyed annotation
// holds it. The hard power-off waits until the press has landed.
func TestReview36p_LostPressHeldHostReadOnWaitsLanding(t *testing.T) {
	rec, pw, store, clk := iloSettled(t, reboot.Host{Name: "h", Online: true})
	clk.Advance(time.Duration(1e9-clk.Real().Nanosecond()%1e9) + 500*time.Millisecond)
	landing := reboot.LostLandingOf(rec.Config) - 100*time.Millisecond
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: landing})
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": "t1"}
	}))
	var cutDone, onDone bool
	var pressAt, onAt time.Time
	reconcileUntil(t, rec, clk, requestAt.Add(10*time.Minute), time.Hour, func(now time.Time) {
		if pressAt.IsZero() {
			for _, c := range pw.Calls() {
				if c.Op == fake.OpOff && c.Mode == power.ModeSoft && c.Err != nil {
					pressAt = c.At // the lost soft press
				}
			}
		}
		switch {
		case !pressAt.IsZero() && !cutDone && now.Sub(pressAt) >= 5*time.Second:
			cutDone = true
			pw.OutOfBandOff() // a pulled cable: the request is fenced on it
		case cutDone && !onDone && now.Sub(pressAt) >= 60*time.Second:
			h, err := store.Get(context.Background(), "h")
			require.NoError(t, err)
			require.True(t, h.Status.Covers(), "the setup: the host is held off before someone powers it on")
			onDone, onAt = true, now
			pw.OutOfBandOn() // someone powers the held host on
		}
	})
	require.True(t, onDone, "the setup: the held host was powered on out of band")
	h, err := store.Get(context.Background(), "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h))
	var offAt time.Time
	for _, tc := range pw.Truth() {
		if tc.At.Before(onAt) {
			continue
		}
		if !tc.On && offAt.IsZero() {
			offAt = tc.At
		}
		if tc.On && !offAt.IsZero() && tc.Cause == fake.CauseCommand {
			t.Fatalf("the held host (powered on out of band at %v) was powered off at %v and on again at %v by the lost soft press; truth %s",
				onAt.Sub(requestAt), offAt.Sub(requestAt), tc.At.Sub(requestAt), rebootcheck.DescribeTruth(pw))
		}
	}
	require.False(t, offAt.IsZero(), "the setup: the held host went off again; truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview36p_AnsweredPowerOnPressDoesNotDelayRestart: the LastPress a
// pressing power-on records is cleared by the next pass once its answer
// came (no press of this controller may still land), so a controller
// restarted after that presses for a keyed request at once, as before;
// one restarted before that pass counts the press from Status.ActingSince
// or its start, at most LostLanding + SoftTimeout + StaleReads.
func TestReview36p_AnsweredPowerOnPressDoesNotDelayRestart(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration // restart this long after the power-on
		bound func(reboot.Config) time.Duration
	}{
		{"after the next pass", 30 * time.Second, func(c reboot.Config) time.Duration { return c.StaleReads + 5*time.Second }},
		{"at once", 0, func(c reboot.Config) time.Duration {
			return reboot.LostLandingOf(c) + c.SoftTimeout + c.StaleReads + 5*time.Second
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			cfg := reboot.DefaultConfig()
			pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 45 * time.Second,
				Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
			newRec := func() *reboot.Reconciler {
				return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
					Power: func(string) (power.Controller, error) { return pw, nil }}
			}
			clk.Advance(time.Minute)
			rec := newRec()
			var onAt time.Time
			for onAt.IsZero() {
				res, err := rec.Reconcile(ctx, "h")
				require.NoError(t, err)
				if res.Decision.Power == reboot.ActionPowerOn {
					require.NoError(t, res.PowerErr)
					onAt = clk.Real()
					break
				}
				clk.Advance(max(res.RequeueAfter, 100*time.Millisecond))
			}
			reconcileUntil(t, rec, clk, onAt.Add(c.after), time.Hour, nil)
			rec = newRec() // a restart
			requestAt := clk.Real()
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": "t1"}
			}))
			var pressAt time.Time
			reconcileUntil(t, rec, clk, requestAt.Add(15*time.Minute), time.Hour, func(time.Time) {
				for _, call := range pw.Calls() {
					if pressAt.IsZero() && call.Op == fake.OpOff && call.At.After(requestAt) {
						pressAt = call.At
					}
				}
			})
			require.False(t, pressAt.IsZero(), "no power-off after the request; truth %s", rebootcheck.DescribeTruth(pw))
			t.Logf("power-off %v after the request", pressAt.Sub(requestAt))
			require.LessOrEqual(t, pressAt.Sub(requestAt), c.bound(cfg))
		})
	}
}
