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

// lostOnPress is a BMC whose only reset type is the power button
// (fake.ButtonAll: On and Off both press it). The answer of the first
// power-on sent after arm is lost the way power/ipmi reports a lost
// datagram (class busy, no protocol status: reboot's answerLost says
// lost), and the BMC carries the press out land after the call's return
// (within Config.LostLanding, assumption A5).
type lostOnPress struct {
	*fake.Power
	clk     *fake.Clock
	land    time.Duration
	armed   bool
	lost    bool
	pending bool
	landAt  time.Time
}

func (l *lostOnPress) On(ctx context.Context) error {
	if l.armed && !l.lost {
		l.lost, l.pending, l.landAt = true, true, l.clk.Real().Add(l.land)
		return &power.Error{Op: "on", Class: power.ClassBusy,
			Message: "the answer to the power-on was lost (timeout); it may have been carried out"}
	}
	return l.Power.On(ctx)
}

// Review 36 round 14 (TestReview36n_LostPowerOnPressLandsThenPressPowersHeldHostOn):
// A5 says "A BMC carries out a power call whose answer was lost ... within
// Config.LostLanding of the call's return, or never", but only power-offs
// and presses for a power-off are noted lost (tracker.go sentOff ->
// lost.note; nothing in sentOn), and a power-on is never a press for
// reboot (Toggler only has TogglesOff; pressWait reads QuietFor alone for
// power-ons). On a BMC whose power-on is a press of the power button
// (PushPowerButton only: fake.ButtonAll), a power-on whose answer was lost
// lands later as a press. Here: Online=false is enforced (the host shuts
// down), then Online=true; the first power-on's answer is lost (lands 45 s
// later), the controller powers on again 30 s later on a fresh Off
// reading (the host runs), a client's keyed (held) request arrives, and
// the lost press lands on the running host: its OS shuts down in 10 s.
// The controller, reading On (a 29 s old echo of the host before the lost
// press shut it), QuietFor >= StaleReads after its second power-on, sends
// the soft power-off, a press: the host, off, powers on while the keyed
// annotation holds it off (ground truth: a command powers the hardware on
// after the request).
func TestReview36n_LostPowerOnPressLandsThenPressPowersHeldHostOn(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &lostOnPress{clk: clk, land: 45 * time.Second,
		Power: fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 10 * time.Second,
			Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	start := clk.Real().Add(5 * time.Minute)
	onlineAt := start.Add(2 * time.Minute)
	requested := false
	landed, requestAt := review36LostRun{start: start, end: start.Add(12 * time.Minute), onlineAt: onlineAt,
		arm: func() { pw.armed = true },
		// The client's held request, once the second power-on ran the
		// host (before the lost press lands).
		requestWhen: func() bool { requested = requested || pw.lost && pw.Power.HardwareOn(); return requested },
		maxStep:     time.Second, logOn: true}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, pw.lost && !landed.IsZero() && requested, "the setup: a power-on's answer was lost, it landed later, a held request came")
	if tc, ok := review36OnByCommandAfter(pw.Power, landed); ok {
		t.Fatalf("a press sent on an On reading that echoed the host before a lost power-on press (returned %v before landing, A5) shut it down powered the held host on at %v (request at %v, landed at %v); truth %s",
			pw.land, tc.At.Sub(start), requestAt.Sub(start), landed.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
}

// statusLostSoftOff is lostSoftOff (review_36l_test.go) whose lost soft
// shutdown returns err: an answer that carries a protocol status but says
// the command's own outcome is unknown.
type statusLostSoftOff struct {
	lostSoftOff
	err error
}

func (l *statusLostSoftOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft && !l.lost {
		if s, err := l.Power.State(ctx); err == nil && s == power.StateOff {
			return nil
		}
		l.lost, l.pending, l.landAt = true, true, l.clk.Real().Add(l.land)
		return l.err
	}
	return l.lostSoftOff.Off(ctx, m)
}

// Review 36 round 14 (TestReview36n_IPMITimeoutCompletionCodeIsNotAnAnswer):
// answerLost (outcome.go:48) calls every power.Error with a protocol
// status answered, so not lost (A5). power/ipmi classifies completion
// code C3h ("Timeout while processing command. Response unavailable",
// IPMI v2.0 table 5-2) as busy with Status 0xC3 (ipmi.go classify,
// busyCodes): the BMC says it did not finish processing the command and
// has no response for it; the chassis control may still be carried out
// (as CEh "command response could not be provided"). Such a soft shutdown
// (a press on this BMC) counts from its return, not LostLanding after it,
// and the scenario of TestReview36l_IPMILostSoftOffLandingLateThenSlowShutdown
// (press lands 20 s after return, OS 170 s, reads 29 s old, held request
// at 100 s) powers the held host on at SoftTimeout + StaleReads.
func TestReview36n_IPMITimeoutCompletionCodeIsNotAnAnswer(t *testing.T) {
	runStatusLostSoftOff(t, &power.Error{Op: power.OpName(power.ModeSoft), Class: power.ClassBusy, Status: 0xc3,
		Message: "completion code 0xc3: timeout while processing command, response unavailable"})
}

func runStatusLostSoftOff(t *testing.T, lostErr error) {
	w := newReview36World()
	clk := w.clk
	pw := &statusLostSoftOff{err: lostErr, lostSoftOff: lostSoftOff{clk: clk, land: 20 * time.Second, Power: review36SlowShutdown(clk)}}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	start := clk.Real().Add(5 * time.Minute)
	onlineAt, requestAt := start.Add(5*time.Second), start.Add(100*time.Second)
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt}.
		run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, pw.lost && !landed.IsZero(), "the setup: a soft shutdown's outcome was unknown and it landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("a soft shutdown answered %v (outcome unknown) counted as answered; it landed %v after its return (A5) and a press at SoftTimeout + StaleReads powered the held host on at %v (request at %v); truth %s",
			lostErr, pw.land, tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
}

// Review 36 round 14 (TestReview36n_RestartEveryFiveMinutesNeverReboots):
// since 2e246f3 a controller counts every power-off and press a previous
// process may have sent (a reboot pending at its start) as lost, sent
// LostLanding after its start (reconciler.go sinceOff: h.lost.unseen(...,
// o.lastOff) at the first pass; A5 "so a restarted controller ... waits
// LostLanding longer before it presses"). With the defaults a restarted
// controller so waits LostLanding + SoftTimeout + StaleReads = 390 s from
// its start before any press; before, SoftTimeout + StaleReads = 210 s. On
// a BMC whose every power-off is a press (PushPowerButton only,
// fake.ButtonAll: hard presses too, so nothing escalates past it), a
// controller restarted every 5 minutes (a pod in CrashLoopBackOff at its
// 300 s cap, an OOM kill, a leadership handover every 5 minutes) never
// sends a power-off: the bare reboot asked at 0 (its first press answered 409
// busy, not carried out, and retried after RetryDelay) is not carried out
// in 30 minutes, the fault (the restarts) kept on. The one press sent was refused (409): no
// previous process's press can be landing; a bound on the wait that does
// not restart with every process (counted from PendingRebootSince or
// Status.LastPress, which are persisted) would end it.
func TestReview36n_RestartEveryFiveMinutesNeverReboots(t *testing.T) {
	pw, cfg, requestAt, end, restarts := review36PressOnlyInterrupted(t, 5*time.Minute, false)
	require.True(t, pw.WasOffDuring(requestAt, end),
		"a bare reboot asked at 0 of a host whose BMC only presses was never carried out in 30 minutes with the controller restarted every 5 minutes (%d restarts; each waits LostLanding + SoftTimeout + StaleReads = %v from its start before pressing, the one press sent was answered 409 busy, not carried out); truth %s",
		restarts, reboot.LostLandingOf(cfg)+cfg.SoftTimeout+cfg.StaleReads, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 14 (TestReview36n_RestartThenForgetBeforeFirstPassForgetsLostLanding):
// round 13's fix counts what a previous process may have sent as lost at
// the host's first pass (reconciler.go sinceOff: `if first && !h.forgot`
// ... h.lost.unseen(...)). A memory made by Forget (memory.forgotten:
// forgot true, lost copied from the old memory) skips that block, so a
// restarted controller that forgets a host before its first pass of it
// counts a previous process's press only from the Forget, for SoftTimeout
// + StaleReads, never LostLanding later (A5). Reconciler.Loop calls Forget
// whenever a pass finds the record NotFound (run.go:473), e.g. a cache
// not yet synced after the restart; the doc promises "So a restarted
// controller ... waits LostLanding longer before it presses". The round-13
// scenario (TestReview36m_RestartAfterLostSoftOffForgetsLostLanding) with
// that Forget: the held host is powered on by a press on an echo.
func TestReview36n_RestartThenForgetBeforeFirstPassForgetsLostLanding(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &lostSoftOff{clk: clk, land: 20 * time.Second, Power: review36SlowShutdown(clk)}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	start := clk.Real().Add(5 * time.Minute)
	restartAt := start.Add(time.Second)
	onlineAt, requestAt := start.Add(5*time.Second), start.Add(100*time.Second)
	restarted := false
	restart := func() *reboot.Reconciler {
		if !restarted && pw.lost && !clk.Real().Before(restartAt) {
			restarted = true
			rec := w.newRec() // the controller restarts
			// Its first pass of the host finds the record NotFound (a
			// cache not yet synced after the restart, the record
			// re-created): Reconciler.Loop forgets the host (run.go).
			rec.Forget("h")
			return rec
		}
		return nil
	}
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt,
		restart: restart, also: func() []time.Time { return []time.Time{restartAt} }}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, restarted && pw.lost && !landed.IsZero(), "the setup: a soft shutdown's answer was lost, the controller restarted, the press landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("after a restart 1 s after a lost soft shutdown and a Forget before the new controller first read the host (landed at %v, OS 170 s), it pressed on an echo and powered the held host on at %v, a keyed annotation present since %v; truth %s",
			landed.Sub(start), tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// hiccupGuard holds the leadership, but refuses the next refuse Holds.
type hiccupGuard struct{ refuse int }

func (g *hiccupGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.refuse > 0 {
		g.refuse--
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// Review 36 round 14 (TestReview36n_LeaseHiccupEveryFiveMinutesNeverReboots):
// as TestReview36n_RestartEveryFiveMinutesNeverReboots, without a restart:
// the one Reconciler keeps the leadership, but one Hold every 5 minutes is
// refused (a lease renewal that failed once: an API server's hiccup). Every
// refusal makes it stand by for a pass (reconciler.go noteHold), and the
// next successful Hold begins a leadership: memory.lead (tracker.go:461)
// notes every press and power-off the status shows (this Reconciler's own
// LastPress and PendingRebootSince, read while standing by) as unseen, sent
// LostLanding after then, so no press goes out for LostLanding +
// SoftTimeout + StaleReads = 390 s after each hiccup: a host whose BMC only
// presses never reboots, though this process wrote every value itself and
// no other leader ever existed.
func TestReview36n_LeaseHiccupEveryFiveMinutesNeverReboots(t *testing.T) {
	pw, cfg, requestAt, end, restarts := review36PressOnlyInterrupted(t, 5*time.Minute, true)
	require.True(t, pw.WasOffDuring(requestAt, end),
		"a bare reboot asked at 0 of a host whose BMC only presses was never carried out in 30 minutes with one Hold of the controller refused every 5 minutes (%d refusals; each leadership waits LostLanding + SoftTimeout + StaleReads = %v from its start before pressing, the one press sent was answered 409 busy, not carried out); truth %s",
		restarts, reboot.LostLandingOf(cfg)+cfg.SoftTimeout+cfg.StaleReads, rebootcheck.DescribeTruth(pw))
}
