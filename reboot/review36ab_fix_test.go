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

// nullThenStuckOff answers null until the first power-off call (a
// passing glitch at the request), then reads Transitioning while the
// host is off (stuckPoweringOff) and honestly while it runs.
type nullThenStuckOff struct {
	*fake.Power
	offs *atomic.Int64
}

func (n nullThenStuckOff) Off(ctx context.Context, m power.Mode) error {
	n.offs.Add(1)
	return n.Power.Off(ctx, m)
}

func (n nullThenStuckOff) State(ctx context.Context) (power.State, error) {
	st, err := n.Power.State(ctx)
	switch {
	case err != nil:
		return st, err
	case n.offs.Load() == 0:
		return power.StateUnknown, nil
	case st == power.StateOff:
		return power.StateTransitioning, nil
	}
	return st, nil
}

// TestReview36abFix_BareStuckOffOneCycle: the other side of
// TestReview36ab_BareRebootAskedDuringStuckOffRunOffForEver's fix. A bare
// hard reboot whose ForceOff is decided on a null reading (no
// Status.OffOnSane) and carried out, the BMC then reading Transitioning
// while the host is off: the power-on that answers the long run (the
// reboot still pending) powers the host on, and the On reading that
// follows ends the reboot: the host is power-cycled once, not powered off
// a second time by the reboot's power-off on that On reading (ground
// truth: one power cycle by command), and it runs at the end.
func TestReview36abFix_BareStuckOffOneCycle(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var offs atomic.Int64
	w.Power = nullThenStuckOff{pw, &offs}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	end := at.Add(30 * time.Minute)
	done := time.Time{}
	for clk.Real().Before(end) {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if _, ok := h.Annotations[reboot.Annotation]; !ok && done.IsZero() {
			done = clk.Real()
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, done.IsZero(), "the reboot never ended; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.WasOffDuring(at, done), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "off at the end; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.Equal(t, 1, cycles+oob,
		"a bare reboot on a BMC that reads Transitioning while the host is off, its power-off decided on a null reading: %d power cycles by command (%d out of band) for one request; status %+v; truth %s",
		cycles, oob, h.Status, rebootcheck.DescribeTruth(pw))
}

// saneOffWorld decides a bare hard reboot's first power-off on an On
// reading at t0 and returns the decision and the Config.
func saneOffWorld(t *testing.T) (reboot.Config, reboot.Decision, time.Time) {
	t.Helper()
	cfg := reboot.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ann := map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	d := cfg.Decide(reboot.Observed{Annotations: ann, Online: true, Power: power.StateOn,
		QuietFor: time.Hour, SinceOff: time.Hour, SincePress: time.Hour}, t0)
	require.Equal(t, reboot.ActionPowerOff, d.Power, "the setup: the reboot's power-off; %s", d.Reason)
	require.True(t, d.Status.OffOnSane.IsZero() && d.Status.OffOnSaneDecided.Equal(t0),
		"decided on an On reading: recorded as decided, not as accepted; status %+v", d.Status)
	return cfg, d, t0
}

// TestReview36abFix_SaneOffConfirmedWithoutWriteOfItsOwn: the pass after
// the accepted power-off writes nothing for Status.OffOnSane when nothing
// else changes (keepSaneOff), yet a later pass, its last call still that
// power-off, ends the bare reboot on a long Transitioning run as
// releasedPending does; with the call answered busy it does not, and a
// status of Format 1 (whose OffOnSane was written before the call,
// whatever its answer) is not taken for an accepted power-off.
func TestReview36abFix_SaneOffConfirmedWithoutWriteOfItsOwn(t *testing.T) {
	cfg, d1, t0 := saneOffWorld(t)
	ann := map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	accepted := reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, At: t0.Add(500 * time.Millisecond), For: d1.For}
	d2 := cfg.Decide(reboot.Observed{Annotations: ann, Online: true, Power: power.StateTransitioning, Status: d1.Status,
		LastCall: accepted, QuietFor: time.Hour, SinceOff: 2 * time.Second, SincePress: time.Hour,
		SincePending: 2 * time.Second, SinceRequest: 2 * time.Second, UnsureWhole: true}, t0.Add(2*time.Second))
	require.Equal(t, reboot.ActionNone, d2.Power, "the setup: the power-off under way; %s", d2.Reason)
	require.False(t, d2.UpdateStatus, "a Status write of its own for OffOnSane; status %+v", d2.Status)

	late := t0.Add(4 * time.Minute)
	long := func(st reboot.Status, last reboot.Call) reboot.Decision {
		return cfg.Decide(reboot.Observed{Annotations: ann, Online: true, Power: power.StateTransitioning, Status: st,
			LastCall: last, QuietFor: time.Hour, SinceOff: 4*time.Minute - time.Second, SincePress: time.Hour,
			SincePending: 4 * time.Minute, SinceRequest: 4 * time.Minute, UnsureWhole: true,
			UnsureFor: 4*time.Minute - 2*time.Second}, late)
	}
	d3 := long(d2.Status, accepted)
	require.Equal(t, []string{reboot.Annotation}, d3.RemoveAnnotations,
		"the accepted power-off decided on an On reading, a long Transitioning run after it: the reboot ends (releasedPending); %s; status %+v", d3.Reason, d3.Status)
	require.True(t, d3.Status.OffOnSane.Equal(t0), "written with the pass's write; status %+v", d3.Status)

	busy := accepted
	busy.Class = power.ClassBusy
	d4 := long(d2.Status, busy)
	require.Empty(t, d4.RemoveAnnotations, "a power-off answered busy ended the reboot; %s", d4.Reason)
	require.True(t, d4.Status.OffOnSane.IsZero(), "a power-off answered busy recorded as accepted; status %+v", d4.Status)

	old := d3.Status
	old.Format = 1
	old.LastPoweredOn, old.Seen = time.Time{}, d1.Status.Seen // the reboot pending, as round 27 wrote it
	d5 := long(old, accepted)
	require.Empty(t, d5.RemoveAnnotations, "a Format 1 OffOnSane taken for an accepted power-off; %s", d5.Reason)
	require.True(t, d5.Status.OffOnSane.IsZero() && d5.Status.Format == reboot.StatusFormat, "status %+v", d5.Status)
}
