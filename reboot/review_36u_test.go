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

// stuckTransitioning is a BMC whose PowerState is stuck at a transitional
// value (Redfish "PoweringOn"/"PoweringOff" left behind by a firmware bug)
// while the host runs; once the hardware is off it reads Off. Its power
// calls set the power (no button: ButtonNone), so a hard power-off needs
// no reading at all.
type stuckTransitioning struct{ *fake.Power }

func (s stuckTransitioning) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil && st == power.StateOn {
		return power.StateTransitioning, nil
	}
	return st, err
}

// review36uLoop runs rec every RequeueAfter (capped at 30 s) from the
// clock's now until end.
func review36uLoop(t *testing.T, rec *reboot.Reconciler, clk *fake.Clock, end time.Time, from time.Time) {
	t.Helper()
	ctx := context.Background()
	for clk.Real().Before(end) {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && (res.Decision.Power != reboot.ActionNone || res.Decision.Reason != "") {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(from), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
}

// Review 36 round 21 (TestReview36u_StuckTransitioningSoftRebootNeverFallsBackHard):
// a soft reboot now escalates to hard before its first soft power-off
// only if softTimedOut (toggle.go) finds the readings keep the soft
// power-off from going out, and it asks that only of a BMC whose soft
// power-off presses (pressWait). But pending (decide.go, "powering off:
// wait") also keeps the soft power-off of a BMC that does NOT press from
// going out on a Transitioning reading, and never stamps SoftSince:
// softTimedOut returns false for ever (not sent, no landWait, pressWait
// false for a non-toggler), so the mode stays soft, the "powering off:
// wait" branch (st.Mode == mode) returns every pass, and the reboot is
// never carried out. Before fed5f87 the same host was cut hard
// PendingRebootSince + SoftTimeout after the request (the changed mode
// skipped that wait and the hard power-off is sent whatever the reading).
// doc.go promises the fallback "after SoftTimeout from the request" for a
// soft power-off the readings keep from going out.
func TestReview36u_StuckTransitioningSoftRebootNeverFallsBackHard(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, cfg, store := w.clk, w.cfg, w.store
	// The OS ignores the soft request anyway; only a hard power-off
	// reboots it.
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	rec := w.settled(t, stuckTransitioning{pw}) // the controller has run for long
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ""}
	}))
	end := requestAt.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, requestAt.Add(cfg.SoftTimeout+time.Minute)),
		"a soft bare reboot of a host whose BMC (no button) reads Transitioning while it runs was not carried out within SoftTimeout + 1 min (not at all in 30 min: %v): no soft power-off goes out on a Transitioning reading, so SoftSince is never stamped, and softTimedOut never lets it fall back to hard on a BMC that does not press; status %+v; truth %s",
		pw.WasOffDuring(requestAt, end), h.Status, rebootcheck.DescribeTruth(pw))
}

// nullWhileOn is a BMC that answers PowerState null (StateUnknown, no
// error) while the host runs, as the BMC of issue 36 point 4; Off once the
// hardware is off.
type nullWhileOn struct{ *fake.Power }

func (s nullWhileOn) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil && st == power.StateOn {
		return power.StateUnknown, nil
	}
	return st, err
}

// Review 36 round 21 (TestReview36u_OfflineNullReadingsNeverPowerOff):
// doc.go (new in 19af5ce) says Online=false falls back to hard
// SoftTimeout after its first soft power-off, "from OfflineSince if the
// readings keep the soft power-off from going out (a press needs an On
// reading)". But idle (decide.go, "power state unknown: wait") enforces
// Online=false only on an On reading: on an iLO-like BMC (soft presses,
// hard sets the power) whose readings are unknown while the host runs,
// OfflineSince is never set, no soft and no hard power-off is ever sent,
// and the host runs for ever with Online=false. A pending reboot on the
// same BMC falls back to a hard power-off, which is sent whatever the
// reading. Pre-existing (the idle switch is unchanged), but the new
// sentence promises otherwise.
func TestReview36u_OfflineNullReadingsNeverPowerOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, cfg, store := w.clk, w.cfg, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 20 * time.Second})
	rec := w.settled(t, nullWhileOn{pw})
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, at.Add(cfg.SoftTimeout+time.Minute)),
		"Online=false on an iLO-like BMC answering null while the host runs: not powered off within SoftTimeout + 1 min (at all in 30 min: %v); status %+v; truth %s",
		pw.WasOffDuring(at, end), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 21 (TestReview36u_StuckTransitioningHardRebootNeverSent):
// the same "powering off: wait" branch of pending (decide.go: o.Power ==
// StateTransitioning && st.Mode == mode) holds a HARD reboot for ever on
// a BMC (no button) stuck reading Transitioning while the host runs,
// though doc.go says a power-off that sets the power "is sent whatever
// the reading" and the branch is meant for a power-off under way (there
// is none: nothing was sent). A keyed fence asked hard never comes.
// Pre-existing (the wait is older than 19af5ce); the soft case
// (TestReview36u_StuckTransitioningSoftRebootNeverFallsBackHard) is the
// regression.
func TestReview36u_StuckTransitioningHardRebootNeverSent(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	rec := w.settled(t, stuckTransitioning{pw})
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	end := requestAt.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, requestAt.Add(time.Minute)),
		"a hard keyed fence of a host whose BMC (no button) reads Transitioning while it runs: no hard power-off within 1 min (at all in 30 min: %v); status %+v; truth %s",
		pw.WasOffDuring(requestAt, end), h.Status, rebootcheck.DescribeTruth(pw))
}
