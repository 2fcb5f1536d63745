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

// slowLostSoftOff is lostSoftOff whose first soft shutdown takes took to
// return (its answer lost), and lands land after that return (A5).
type slowLostSoftOff struct {
	*fake.Power
	clk     *fake.Clock
	took    time.Duration
	land    time.Duration
	lost    bool
	pending bool
	landAt  time.Time
	back    time.Time
}

func (l *slowLostSoftOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft {
		if s, err := l.Power.State(ctx); err == nil && s == power.StateOff {
			return nil
		}
		if !l.lost {
			l.clk.Advance(l.took) // the call hangs, then times out
			l.lost, l.pending = true, true
			l.back = l.clk.Real()
			l.landAt = l.back.Add(l.land)
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy,
				Message: "the answer to the soft shutdown was lost (timeout); it may have been carried out"}
		}
	}
	return l.Power.Off(ctx, m)
}

// Review 36 round 15 (TestReview36o_ActingSinceTruncatedCountsLostPressEarly):
// Status.ActingSince is written truncated DOWN to Config.Precision
// (decide.go:664 o.ActingSince.Truncate(c.Precision)), and a restarted
// controller counts every press decided before it as returned at
// ActingSince (reconciler.go actedBound.press). But the truth A4 gives is
// only that the earlier process stopped by the writer's real start, up to
// Precision (1 s) after the truncated value. A press decided at 0.9 s into
// a second (LastPress = that second), whose call hangs 0.6 s past the next
// second and returns lost, then the process dies and a new one starts 0.1
// s later (ActingSince = that next second, 0.7 s before its real start),
// then restarts once more: the third process counts the lost press as
// returned 0.6 s before it really returned. With a BMC that carries the
// press out LostLanding after its return, an OS that shuts down in
// SoftTimeout, and reads StaleReads - 0.1 s old (all inside A1, A5), the
// controller reads On (an echo) exactly LostLanding + SoftTimeout +
// StaleReads after the truncated ActingSince and presses: the host, off
// for 29.4 s by then, powers on while a keyed annotation holds it off.
// Before ActingSince the restart counted from its own start (monotonic,
// untruncated). Fix: round ActingSince up (or count from it + Precision).
func TestReview36o_ActingSinceTruncatedCountsLostPressEarly(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk := w.clk
	w.cfg.LostLanding = 20 * time.Second // the BMC's bound on a lost call's landing (A5)
	cfg := w.cfg
	pw := &slowLostSoftOff{clk: clk, took: 700 * time.Millisecond, land: reboot.LostLandingOf(cfg),
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: cfg.SoftTimeout,
			Report: fake.Report{Stale: cfg.StaleReads - 100*time.Millisecond, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	// 0.9 s into a second: the press is decided there (LastPress is that
	// second, truncated).
	start := clk.Real().Add(5*time.Minute + 900*time.Millisecond)
	onlineAt, requestAt := start.Add(5*time.Second), start.Add(100*time.Second)
	restarts := 0
	var restartAt time.Time
	restart := func() *reboot.Reconciler {
		if pw.lost && restarts == 0 {
			restarts, restartAt = 1, pw.back.Add(100*time.Millisecond)
		}
		if restarts == 1 && !clk.Real().Before(restartAt) {
			restarts, restartAt = 2, clk.Real().Add(1300*time.Millisecond)
			return w.newRec() // the process dies 0.1 s after the call's return; a new one starts
		} else if restarts == 2 && !clk.Real().Before(restartAt) {
			restarts = 3
			return w.newRec() // and restarts once more
		}
		return nil
	}
	landed, _ := review36LostRun{start: start, end: start.Add(8 * time.Minute), onlineAt: onlineAt, requestAt: requestAt,
		restart: restart, also: func() []time.Time { return []time.Time{restartAt} }, logActions: true}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, restarts == 3 && pw.lost && !landed.IsZero(), "the setup: a soft shutdown's answer was lost, the controller restarted twice, the press landed later")
	st, err := w.store.Get(ctx, "h")
	require.NoError(t, err)
	t.Logf("status: LastPress %v ActingSince %v (the call returned at %v)", st.Status.LastPress.Sub(start), st.Status.ActingSince.Sub(start), pw.back.Sub(start))
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("a lost press (returned at %v, landed at %v, OS SoftTimeout) was counted from the truncated ActingSince after two restarts: the controller pressed on an echo and powered the held host on at %v, a keyed annotation present since %v; truth %s",
			pw.back.Sub(start), landed.Sub(start), tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// Review 36 round 15 (TestReview36o_LostPowerOnPressSlowShutdownPressesOnEcho):
// round 14 counts a power-on press whose answer was lost as sent
// LostLanding after its return (toggle.go sentOn -> h.lost.note), but
// only through Observed.SinceOff/SincePress; it leaves the memory's
// offState untouched (unlike sentOff, which moves lastPress and so
// voids PressOver). The Off readings taken before the lost press landed
// (the host was off from the Online=false enforcement) still say
// PressOver, so pressWait (toggle.go:82) waits only StaleReads after
// SinceOff, never SoftTimeout + StaleReads after the press: the
// controller presses LostLanding + StaleReads after the lost power-on.
// The scenario of TestReview36n_LostPowerOnPressLandsThenPressPowersHeldHostOn
// with the lost press landing 100 s after its return and an OS that shuts
// down in 100 s (both inside A2/A5): the host is off 200 s after the lost
// return; at 210 s the controller reads On (an echo of 181 s) and
// presses: the held host powers on.
func TestReview36o_LostPowerOnPressSlowShutdownPressesOnEcho(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &lostOnPress{clk: clk, land: 100 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 100 * time.Second,
			Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	start := clk.Real().Add(5 * time.Minute)
	onlineAt := start.Add(2 * time.Minute)
	requested := false
	landed, requestAt := review36LostRun{start: start, end: start.Add(12 * time.Minute), onlineAt: onlineAt,
		arm:         func() { pw.armed = true },
		requestWhen: func() bool { requested = requested || pw.lost && pw.Power.HardwareOn(); return requested },
		maxStep:     time.Second, logOn: true, logActions: true}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, pw.lost && !landed.IsZero() && requested, "the setup: a power-on's answer was lost, it landed later, a held request came")
	if tc, ok := review36OnByCommandAfter(pw.Power, landed); ok {
		t.Fatalf("a lost power-on press landed %v after its return on the running host (OS %v); the controller pressed on an echo LostLanding + StaleReads after the return, powering the held host on at %v (request at %v, landed at %v); truth %s",
			pw.land, 100*time.Second, tc.At.Sub(start), requestAt.Sub(start), landed.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
}

// Review 36 round 15 (TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots):
// round 14 fixed TestReview36n_LeaseHiccupEveryFiveMinutesNeverReboots by
// no longer counting this controller's own LastPress as an unseen (lost)
// press at a new leadership (ownValues.wrotePress), which took the wait
// after each leadership from LostLanding + SoftTimeout + StaleReads (390
// s) down to SoftTimeout + StaleReads (210 s), but did not remove it:
// each new leadership of the same process still holds every press
// "power-off presses the power button: wait for an On reading that cannot
// be an echo" for about 210 s (a hiccup every 215 s lets the reboot
// through, every 180 s does not). The same scenario with one Hold refused
// every 3 minutes (a lease renewal that fails once every few minutes on a
// loaded API server): the same process leads throughout and wrote every
// value itself, and the bare reboot on a BMC that only presses is never
// carried out in 30 minutes, the fault kept on. Suspected: sinceOff's
// standby branch (reconciler.go ~480, press = !st.LastPress.IsZero() ->
// offState{lastPress: m}) and memory.lead (tracker.go:515,
// h.heard.press) still take its own LastPress as another leader's press
// sent at the leadership; switching both to lostPress alone does not
// make this pass, so another rule restarts the wait too (not isolated).
func TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots(t *testing.T) {
	pw, cfg, requestAt, end, restarts := review36PressOnlyInterrupted(t, 3*time.Minute, true)
	require.True(t, pw.WasOffDuring(requestAt, end),
		"a bare reboot asked at 0 of a host whose BMC only presses was never carried out in 30 minutes with one Hold of the controller refused every 3 minutes (%d refusals; each leadership takes its own LastPress as another leader's press sent at its start and waits SoftTimeout + StaleReads = %v before pressing, the one press sent was answered 409 busy, not carried out); truth %s",
		restarts, cfg.SoftTimeout+cfg.StaleReads, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 15 (TestReview36o_RestartEveryThreeMinutesNeverReboots):
// doc.go (A5) promises that Status.ActingSince makes "restarts every few
// minutes not put the press off for ever". ActingSince only dates the
// LOST count of a previous process's LastPress (actedBound.press); the
// restarted memory still takes that press as possibly in effect from its
// own start (newMemory(start): offState.lastPress = start, first pass of
// sinceOff), so pressWait (toggle.go:85, SoftTimeout + StaleReads -
// SincePress) holds every press 210 s after each restart. The round-14
// scenario with a restart every 3 minutes instead of 5 (a crash loop,
// liveness-probe kills) never carries the bare reboot out in 30 minutes,
// the fault kept on. (Dropping the first pass's unseen power-off alone
// does not make it pass: the press wait is the one that restarts.) Fix
// direction: date the in-effect press from ActingSince too (a press
// decided before it had its SoftTimeout counted from then at the latest).
func TestReview36o_RestartEveryThreeMinutesNeverReboots(t *testing.T) {
	pw, cfg, requestAt, end, restarts := review36PressOnlyInterrupted(t, 3*time.Minute, false)
	require.True(t, pw.WasOffDuring(requestAt, end),
		"a bare reboot asked at 0 of a host whose BMC only presses was never carried out in 30 minutes with the controller restarted every 3 minutes (%d restarts; each waits LostLanding + SoftTimeout + StaleReads = %v from its start before pressing, the one press sent was answered 409 busy, not carried out); truth %s",
		restarts, reboot.LostLandingOf(cfg)+cfg.SoftTimeout+cfg.StaleReads, rebootcheck.DescribeTruth(pw))
}
