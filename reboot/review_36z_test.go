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

// Review 36 round 26 (TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack):
// f933fe7's deadBackoff (decide.go, wait) doubles the delay between
// failed or busy calls while the readings are unknown (Call.Fails), on
// the ground that a BMC whose readings are unknown "answers nothing", and
// counts on a reading that is not unknown to end the back-off once it
// answers again. Issue 36 point 4's BMC (its Redfish service lost its
// power sensor: PowerState null for good, every call carried out) never
// gives one: a fence asked of such a host while its network is down
// (every call times out) for 22 minutes waits, once the network is back
// and the BMC takes calls again, for the back-off grown meanwhile (here
// 20 minutes; an hour at most), the host running and the fence
// unanswered. Before f933fe7 the ForceOff was tried every RetryDelay and
// went out within seconds of the network's return.
func TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	var dead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	w.Power = nullAlways{pw}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	dead.Store(true) // the BMC's network goes down
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(22*time.Minute), at)
	require.True(t, pw.HardwareOn(), "the setup: no call reached the BMC while its network was down")
	dead.Store(false) // the network is back: the BMC takes every call, its readings still null
	back := clk.Real()
	review36uLoop(t, rec, clk, back.Add(w.cfg.RetryDelay+w.cfg.PollInterval), back)
	offAt := time.Time{}
	for _, tc := range pw.Truth() {
		if !tc.On && !tc.At.Before(back) {
			offAt = tc.At
			break
		}
	}
	review36uLoop(t, rec, clk, back.Add(time.Hour), back)
	for _, tc := range pw.Truth() {
		if !tc.On && !tc.At.Before(back) && offAt.IsZero() {
			offAt = tc.At
		}
	}
	late := "never"
	if !offAt.IsZero() {
		late = offAt.Sub(back).String()
	}
	require.False(t, offAt.IsZero() || offAt.After(back.Add(w.cfg.RetryDelay+w.cfg.PollInterval)),
		"a hard fence of a running host whose BMC reads null for good (lost power sensor), its network down 22 min then back (every call carried out): the ForceOff reached the host %s after the network came back, not within RetryDelay + PollInterval (power-offs during the outage %d); truth %s",
		late, review36xCount(pw, fake.OpOff, at)-review36xCount(pw, fake.OpOff, back), rebootcheck.DescribeTruth(pw))
}
