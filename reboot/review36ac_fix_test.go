package reboot_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36acFix_GaveUpSurvivesRestartThenSaneReadingResumes:
// TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver's BMC. Once
// bareStuck gave up (Status.StuckGaveUp, warned ErrStuckTransitioning) a
// restarted controller, which no longer knows the power-on's answer,
// still sends no power-off (round 30: power-ons that set the power may
// go out); when the BMC reads On again the reboot ends with the host on
// and no second power cycle (an On reading after the stuck power-on is
// the host on after it).
func TestReview36acFix_GaveUpSurvivesRestartThenSaneReadingResumes(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	warned := false
	var gaveUp time.Time
	for end := at.Add(20 * time.Minute); clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		for _, w := range res.Decision.Warnings {
			warned = warned || errors.Is(w, reboot.ErrStuckTransitioning)
		}
		if gaveUp.IsZero() && !res.Decision.Status.StuckGaveUp.IsZero() {
			gaveUp = clk.Real()
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.False(t, gaveUp.IsZero(), "the setup: bareStuck gave up; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, warned, "no ErrStuckTransitioning warning")
	rec = w.newRec() // a restart: the power-on's answer is forgotten
	restart := clk.Real()
	review36uLoop(t, rec, clk, restart.Add(20*time.Minute), restart)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.Zero(t, review36xCount(pw, fake.OpOff, gaveUp),
		"a power-off after StuckGaveUp (restart at %v); status %+v; truth %s", restart.Sub(at), h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, h.Status.StuckGaveUp.IsZero(), "StuckGaveUp lost; status %+v", h.Status)
	require.Contains(t, h.Annotations, reboot.Annotation)
	cycles, oob := rebootcheck.Cycles(pw)
	require.Equal(t, 1, cycles+oob, "truth %s", rebootcheck.DescribeTruth(pw))

	arm.Store(false) // the BMC fixed: it reads On
	sane := clk.Real()
	review36uLoop(t, rec, clk, sane.Add(20*time.Minute), sane)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotContains(t, h.Annotations, reboot.Annotation, "the reboot never ended after the BMC read sanely; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, h.Status.StuckGaveUp.IsZero(), "status %+v", h.Status)
	require.True(t, pw.HardwareOn(), "off at the end; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.WasOffDuring(sane, clk.Real()), "an On reading after the stuck power-on ends the reboot: no second power cycle; truth %s", rebootcheck.DescribeTruth(pw))
	cycles, oob = rebootcheck.Cycles(pw)
	require.Equal(t, 1, cycles+oob, "truth %s", rebootcheck.DescribeTruth(pw))
}
