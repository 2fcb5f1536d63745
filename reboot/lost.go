package reboot

import (
	"context"
	"errors"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// lostCalls remembers the latest power-off and the latest press that may
// land Config.LostLanding after a time (monotonic) this controller knows
// (assumption A5): calls whose answer was lost, counted from their
// return, and calls this controller did not see answered (another
// process's or leader's, read in the status), counted from when it first
// knew of them. flight holds apart the one lost call that a late answer
// (LateAnswerer) may still settle: the first one answered busy since the
// previous late answer, the one memory.late takes that answer for (on:
// it is a power-on that may press, sentOn; else a power-off).
type lostCalls struct {
	off, press lostAt
	flight     struct {
		off, press lostAt
		on         bool
	}
}

// mayFly reports whether a call that returned err without an answer may
// be the call in flight that a late answer settles: the first one
// answered busy since the previous late answer (a call running in the
// background: kube.Async). Any other stays lost, and so does one that
// ended in its own deadline: no late answer comes for it
// (TestTrackerLateAnswerKeepsTimedOutPress).
func (l *lostCalls) mayFly(err error) bool {
	return !l.flight.off.set && CallClass(err) == power.ClassBusy && !errors.Is(err, context.DeadlineExceeded)
}

// lostAt is the latest of some times, if any.
type lostAt struct {
	at  time.Duration
	set bool
}

func (l *lostAt) note(at time.Duration) {
	if !l.set || at > l.at {
		l.at, l.set = at, true
	}
}

// note records a power-off (a press if press) that returned at done
// without an answer; inFlight: it may still be settled by a late answer.
func (l *lostCalls) note(press bool, done time.Duration, inFlight bool) {
	off, pr := &l.off, &l.press
	if inFlight {
		off, pr = &l.flight.off, &l.flight.press
	}
	off.note(done)
	if press {
		pr.note(done)
	}
}

// unseen records a power-off (off) and a press (press) that this
// controller did not see answered, known to it since at: they may have
// been lost, so they may land until LostLanding after at.
func (l *lostCalls) unseen(off, press bool, at time.Duration) {
	if off {
		l.off.note(at)
	}
	if press {
		l.press.note(at)
	}
}

// settle records the late answer of a power-on (on) or power-off, taken
// at done: it settles the call in flight if that is one of its kind (it
// is no longer in flight), and if that answer is itself lost
// (answerLost), the call counts as one that returned then without an
// answer (a press if press; a power-on that cannot press is no power-off
// and notes nothing).
func (l *lostCalls) settle(on, lost, press bool, done time.Duration) {
	if l.flight.on == on {
		l.flight.off, l.flight.press, l.flight.on = lostAt{}, lostAt{}, false
	}
	if lost && (press || !on) {
		l.note(press, done, false)
	}
}

// since caps sinceOff and sincePress, taken at m, to count the lost calls
// as sent landing after their return.
func (l lostCalls) since(sinceOff, sincePress, m, landing time.Duration) (time.Duration, time.Duration) {
	for _, a := range []lostAt{l.off, l.flight.off} {
		if a.set {
			sinceOff = min(sinceOff, m-a.at-landing)
		}
	}
	for _, a := range []lostAt{l.press, l.flight.press} {
		if a.set {
			sincePress = min(sincePress, m-a.at-landing)
		}
	}
	return sinceOff, sincePress
}
