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

// Review 36 round 13 (TestReview36m_RestartAfterLostSoftOffForgetsLostLanding):
// A5 (e3bb4a5) counts a power-off or press whose answer was lost as sent
// Config.LostLanding after its return, but keeps that only in the
// memory of the Reconciler (reconciler.go memory.lost, lost.go) that saw
// the call return: a restarted controller (a new process, a new leader,
// a second Reconciler) reads Status.LastPress and counts the press "as
// possibly in effect from its start" (doc.go), i.e. as sent at its start,
// not LostLanding after. The round-12 scenario with a restart 1 s after
// the lost soft shutdown returns: the BMC applies the press 20 s later,
// the OS takes 170 s, reads are 29 s old; at 211 s the new controller
// reads On (an echo of 182 s) and presses: the held host is powered on
// while a keyed annotation holds it off. A5 promises the lost press counts
// as sent LostLanding after its return "whatever the adapter does"; a
// restart is nothing the BMC knows of.
func TestReview36m_RestartAfterLostSoftOffForgetsLostLanding(t *testing.T) {
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
			return w.newRec() // the controller restarts (or a new leader takes over)
		}
		return nil
	}
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt,
		restart: restart, also: func() []time.Time { return []time.Time{restartAt} }}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, restarted && pw.lost && !landed.IsZero(), "the setup: a soft shutdown's answer was lost, the controller restarted, the press landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("after a restart 1 s after a lost soft shutdown (landed at %v, OS 170 s), the new controller pressed on an echo and powered the held host on at %v, a keyed annotation present since %v; truth %s",
			landed.Sub(start), tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// Review 36 round 13 (TestReview36m_SecondReconcilerTakesOverAfterLostSoftOff):
// as TestReview36m_RestartAfterLostSoftOffForgetsLostLanding, but the
// controller that takes over is a second Reconciler that has run passes
// before (the next leader after a handover, a second instance): it reads
// a Status.LastPress it did not write and counts it "as sent at that
// pass, never earlier" (doc.go; reconciler.go sinceOff, foreign), i.e.
// not LostLanding after the lost call's return: it presses at 211 s on an
// echo and powers the held host on.
func TestReview36m_SecondReconcilerTakesOverAfterLostSoftOff(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &lostSoftOff{clk: clk, land: 20 * time.Second, Power: review36SlowShutdown(clk)}
	w.Power = pw
	rec := w.newRec()
	// A second Reconciler (the next leader) has been running its passes
	// all along, before the first one took over, so it is not fresh: it
	// counts the first one's LastPress as sent when it first reads it.
	recB := w.newRec()
	clk.Advance(time.Minute)
	for i := 0; i < 4; i++ {
		_, err := recB.Reconcile(context.Background(), "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	start := clk.Real().Add(5 * time.Minute)
	restartAt := start.Add(time.Second)
	onlineAt, requestAt := start.Add(5*time.Second), start.Add(100*time.Second)
	restarted := false
	restart := func() *reboot.Reconciler {
		if !restarted && pw.lost && !clk.Real().Before(restartAt) {
			restarted = true
			return recB // the first controller stops; the second takes over
		}
		return nil
	}
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt,
		restart: restart, also: func() []time.Time { return []time.Time{restartAt} }}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, restarted && pw.lost && !landed.IsZero(), "the setup: a soft shutdown's answer was lost, the controller restarted, the press landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("after a second Reconciler took over 1 s after a lost soft shutdown (landed at %v, OS 170 s), it pressed on an echo and powered the held host on at %v, a keyed annotation present since %v; truth %s",
			landed.Sub(start), tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// asyncLostSoftOff is lostSoftOff behind a kube.Async-like wrapper: the
// pass stops waiting for the first soft shutdown (busy), the call goes on
// in the background, and its own answer, taken by a later pass
// (LateAnswerer), is the IPMI adapter's lost answer (class busy, "the
// answer to the soft shutdown was lost ... it may have been carried
// out"). The BMC applies the press land after that call returned.
type asyncLostSoftOff struct {
	*fake.Power
	clk      *fake.Clock
	land     time.Duration
	callTime time.Duration // how long the background call runs
	sent     bool
	doneAt   time.Time // when the background call returns (lost)
	answered bool
	pending  bool
	landAt   time.Time
}

func (a *asyncLostSoftOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft {
		if !a.sent {
			a.sent, a.doneAt = true, a.clk.Real().Add(a.callTime)
			a.pending, a.landAt = true, a.doneAt.Add(a.land)
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Err: power.ErrBusy,
				Message: "still running in the background (kube.Async)"}
		}
		if a.clk.Real().Before(a.doneAt) {
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy, Err: power.ErrBusy, Message: "a call in flight"}
		}
		if s, err := a.Power.State(ctx); err == nil && s == power.StateOff {
			return nil // ipmi.go: a soft shutdown is skipped on an Off read
		}
	}
	return a.Power.Off(ctx, m)
}

func (a *asyncLostSoftOff) LateAnswer() (reboot.LateAnswer, bool) {
	if !a.sent || a.answered || a.clk.Real().Before(a.doneAt) {
		return reboot.LateAnswer{}, false
	}
	a.answered = true
	return reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeSoft,
		Err: &power.Error{Op: power.OpName(power.ModeSoft), Class: power.ClassBusy,
			Message: "the answer to the soft shutdown was lost (timeout); it may have been carried out, and a second one may be a press of the power button: nothing more was sent"}}, true
}

// Review 36 round 13 (TestReview36m_LateLostAnswerClearsLostLanding):
// memory.late (late.go:60) clears the lost calls (h.lost = lostCalls{})
// on every late answer of a power-off, with the comment "Its answer came:
// it is no longer lost (A5)". But a late answer can itself be a lost
// answer: behind kube.Async, the IPMI soft shutdown whose datagram
// answer was lost ends in the background with exactly the error A5 is
// about (class busy, "it may have been carried out"). late() then counts
// the press from when the answer was taken (lastPress = now) and drops the
// LostLanding the first busy return had noted: the round-12 scenario
// again (the BMC applies it 20 s after the call returned, OS 170 s, reads
// 29 s old): at 210 s the controller presses on an echo and powers the
// held host on.
func TestReview36m_LateLostAnswerClearsLostLanding(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &asyncLostSoftOff{clk: clk, land: 20 * time.Second, callTime: 5 * time.Second, Power: review36SlowShutdown(clk)}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	start := clk.Real().Add(5 * time.Minute)
	onlineAt, requestAt := start.Add(10*time.Second), start.Add(100*time.Second)
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt,
		also: func() []time.Time { return []time.Time{pw.doneAt} }}.run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, pw.answered && !landed.IsZero(), "the setup: a soft shutdown's late answer was lost and it landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("a soft shutdown whose late answer (kube.Async) was lost, applied 20 s after it returned (OS 170 s), did not count LostLanding: the controller pressed on an echo and powered the held host on at %v, a keyed annotation present since %v; truth %s",
			tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// Review 36 round 13 (TestReview36m_AnsweredBusyPressCountsAsLost):
// A5 (doc.go) is about "a power call whose answer was lost (busy, a
// timeout, an unknown outcome)", but tracker.go sentOff notes every error
// that is not a refusal before sending (`if err != nil {
// h.lost.note(press, done) }`), including an answer the BMC gave: a 409
// busy or a 501 unsupported with its HTTP status, which the Pool itself
// calls answered (power/pool_call.go answered: Status != 0) and the
// Redfish adapter does not count as lost (lostReset only when Status ==
// 0). On a BMC whose every power-off is a press (fake.ButtonAll, a
// Redfish BMC with only PushPowerButton), one press answered 409 blocks
// the next for LostLanding + SoftTimeout + StaleReads (390 s) instead of
// the SoftTimeout + StaleReads (210 s) a press counts for; each such
// answer renews it. The rapid state machine finds it
// (TestRebootStateMachineButtons, with the fault queue kept into the
// liveness phase: three answered faults stretch one hard reboot to 24
// minutes and it does not converge in 25; its fail file is committed).
// Here: a keyed hard reboot, the first press answered 409 (not carried
// out); the host must go off within SoftTimeout + StaleReads + a poll
// and the OS's delay of that answer.
func TestReview36m_AnsweredBusyPressCountsAsLost(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 5 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	clk.Advance(10 * time.Minute)
	for i := 0; i < 20; i++ { // a controller that has run a while
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	require.True(t, pw.HardwareOn())
	cl := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	_, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy}) // answered: 409, not carried out
	var answeredAt time.Time
	var offAt time.Time
	end := clk.Real().Add(15 * time.Minute)
	for clk.Real().Before(end) && offAt.IsZero() {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() {
			t.Logf("%v %v %v %s %v", clk.Real().Format("15:04:05"), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if res.PowerErr != nil && answeredAt.IsZero() {
			answeredAt = clk.Real()
		}
		if !pw.HardwareOn() && offAt.IsZero() {
			offAt = clk.Real()
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 5*time.Second))
	}
	require.False(t, answeredAt.IsZero(), "the setup: the first press was answered 409")
	bound := cfg.SoftTimeout + cfg.StaleReads + cfg.PollInterval + 5*time.Second + 5*time.Second
	if offAt.IsZero() || offAt.Sub(answeredAt) > bound {
		t.Fatalf("a press the BMC answered 409 busy (an answer, not a lost one: A5 does not apply) held the next press back as if lost: the host went off %v after that answer (zero: not in 15 min), more than SoftTimeout + StaleReads + PollInterval + the OS's 5 s (%v); truth %s",
			offAt.Sub(answeredAt), bound, rebootcheck.DescribeTruth(pw))
	}
}
