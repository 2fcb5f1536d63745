package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// stuckTransitioningDropOff is stuckTransitioning (reads Transitioning
// while the host runs, Off once it is off; no button) whose next drop
// power-offs are answered with success and not carried out (a BMC that
// accepts ResetType ForceOff and drops it: a pending job, a lost IPMI
// packet after the answer, a Controller that skipped it).
type stuckTransitioningDropOff struct {
	stuckTransitioning
	drop *atomic.Int64
}

func (s stuckTransitioningDropOff) Off(ctx context.Context, m power.Mode) error {
	if s.drop.Add(-1) >= 0 {
		return nil
	}
	return s.stuckTransitioning.Off(ctx, m)
}

// Review 36 round 26 (TestReview36z_BareRebootDoneWithoutPowerOff):
// f933fe7's releasedPending ends a pending bare reboot as done (heldOff:
// annotation removed, LastPoweredOn written, power-on sent) once its own
// power-off was accepted and SoftTimeout + StaleReads have passed
// (offOver) on a long run of Transitioning readings, taking "accepted"
// for "carried out". On a BMC stuck reading Transitioning while the host
// runs (stuckTransitioning, round 21's BMC), a bare hard reboot's
// ForceOff is accepted and dropped: 210 s later the reboot is reported
// done (annotation removed) though the host never went off (ground
// truth). Before f933fe7 pending re-sent the ForceOff (ReissueAfter) and
// the reboot was carried out.
func TestReview36z_BareRebootDoneWithoutPowerOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var drop atomic.Int64
	w.Power = stuckTransitioningDropOff{stuckTransitioning{pw}, &drop}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	drop.Store(1) // the reboot's first ForceOff is accepted and dropped
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	done := time.Time{}
	for end := at.Add(20 * time.Minute); clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if _, ok := h.Annotations[reboot.Annotation]; !ok && done.IsZero() {
			done = clk.Real()
			break
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.Less(t, drop.Load(), int64(1), "the setup: the first ForceOff was dropped")
	require.False(t, done.IsZero(), "the setup: the reboot ended; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, done),
		"a bare hard reboot, its ForceOff accepted and dropped by a BMC stuck reading Transitioning while the host runs: reported done (annotation removed) %v after the request though the host never went off (power-offs %d); status %+v; truth %s",
		done.Sub(at), review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
}
