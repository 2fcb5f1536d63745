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

// Review 36 round 20 (TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress):
// round 19's fix counts a LastPoweredOn in a status of an older Format as a
// press that may still land (Status.hidesPress, toggle.go:132), but the
// restart's first pass then bounds it by the status's ActingSince
// (reconciler.go:462, actedBound.bound, quiet.go:38). bound refuses an
// ActingSince only when a LastPress is later than it ("a press decided
// after it"); the hidden press is a LastPoweredOn, which it does not
// compare. In a status of an older format ActingSince does not mean what
// it means now: from cb7a34e (main from merge 68a8b2c, review 36 round 14)
// to f2009ae (merge 4cdb2dc) it was the writing process's start, written
// with a LastPress and never cleared, and no power-on wrote LastPress
// (until d228bfb). So such a status, written right after that version's
// pressing power-on whose answer was lost, shows LastPoweredOn (the press),
// no LastPress (the earlier power-off press had settled) and an
// ActingSince minutes before the power-on. The upgraded controller counts
// the hidden press as returned by that ActingSince, long past LostLanding:
// no landWait, the keyed request's power-off goes out at once, and the old
// process's lost power-on press lands (A5, 170 s after it returned, within
// LostLanding) on the held host, off by then: powered on while held.
// Fix (suggested): a press a status hides (Status.hidesPress) is bounded
// by no ActingSince (bound: ok only if !st.hidesPress(onToggles)), or
// an ActingSince of a status of an older Format is ignored altogether.
func TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	land := 170 * time.Second // within LostLanding (180 s) of the return (A5)
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return pw, nil }}
	}
	clk.Advance(time.Minute)
	// The old process (the round-14 version) started here: its
	// ActingSince, written with the LastPress of an earlier power-off
	// press and never cleared (that version cleared only LastPress, once
	// the press had settled).
	oldStart := clk.Now().Truncate(time.Second)
	clk.Advance(9 * time.Minute)
	// The old process's power-on: its answer is lost; the BMC carries it
	// out later.
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: land})
	rec := newRec()
	var lostAt time.Time
	for end := clk.Real().Add(2 * time.Minute); lostAt.IsZero() && clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if res.Decision.Power == reboot.ActionPowerOn {
			require.Error(t, res.PowerErr, "the setup: the first power-on's answer is lost")
			lostAt = clk.Real()
			break
		}
		clk.Advance(max(res.RequeueAfter, 100*time.Millisecond))
	}
	require.False(t, lostAt.IsZero(), "the setup: a power-on was sent")
	// The process dies. Its status, as the round-14 version wrote it: no
	// LastPress for a power-on, no Format, ActingSince its start.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		require.False(t, h.Status.Pending(), "the setup: the power-on ended the reboot")
		require.False(t, h.Status.LastPoweredOn.IsZero(), "the setup: the power-on was recorded")
		h.Status.LastPress, h.Status.ActingSince = time.Time{}, oldStart
		h.Status.Format = 0
	}))
	clk.Advance(time.Second)
	rec = newRec() // the upgraded controller
	requested := false
	var requestAt time.Time
	for end := lostAt.Add(8 * time.Minute); clk.Real().Before(end); {
		if !requested && pw.HardwareOn() && clk.Real().Sub(lostAt) < land {
			requested, requestAt = true, clk.Real()
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": "t1"}
			}))
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(lostAt), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		clk.Advance(max(next, time.Millisecond))
	}
	require.True(t, requested, "the setup: the upgraded controller powered the host on before the lost press landed; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h))
	var offAt time.Time
	for _, tc := range pw.Truth() {
		if !tc.At.After(requestAt) {
			continue
		}
		if !tc.On && offAt.IsZero() {
			offAt = tc.At
		}
		if tc.On && !offAt.IsZero() {
			t.Fatalf("the held host (keyed annotation at %v after the lost power-on) went off at %v and was powered on at %v (%v): the old process's lost power-on press landed after the upgrade, its hidden press bounded by an old-format ActingSince; truth %s",
				requestAt.Sub(lostAt), offAt.Sub(lostAt), tc.At.Sub(lostAt), tc.Cause, rebootcheck.DescribeTruth(pw))
		}
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}
