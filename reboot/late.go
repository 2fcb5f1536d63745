package reboot

import (
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// LateAnswer is the answer of a power call that came after the pass that
// made it had stopped waiting for it (the pass was told power.ErrBusy).
type LateAnswer struct {
	// Action and Mode are the call's (Mode is a power-off's).
	Action Action
	Mode   power.Mode
	// Err is what the call returned once it ended.
	Err error
}

// LateAnswerer is an optional interface of a power.Controller whose calls
// can outlive the pass that made them: kube.Async runs each call in the
// background and answers a pass that stopped waiting busy. The Reconciler
// asks it in every pass, once the power state read returned, and records
// the answer as the outcome of a call that returned now (Observed.LastCall,
// HardUnsupportedAt): a hard power-off that a slow BMC answered
// unsupported still makes the next one soft. The call is taken for the
// first call answered busy since the previous late answer, and counts as
// decided for that call's work (Call.For), unknown if it saw none or the
// calls answered busy since were decided for different work: a soft
// power-off that failed late escalates only the work it was decided for
// (TestReview36i_LateSoftFailureOfEnforcementCutsNewReboot,
// TestReview36j_NewTrackerDatesLateFailureFromItsStart). What the
// answer needs (was the call a press, what was it decided for) outlives
// Reconciler.Forget and Tracker.Forget
// (TestReview36i_TrackerForgetThenLatePressIsNoPress). A power-off that may have
// been carried out (any answer but a refusal before it reached the
// hardware, see CallClass) may have reached the hardware at any time up
// to then, so it counts as sent when the answer was taken (SinceOff), and
// a press (the call was a press, or the controller's Toggler says the
// mode toggles) as a press sent then whose shutdown is not known over
// (SincePress, PressOver): SoftTimeout + StaleReads from then
// (TestReview36h_LateAnsweredPressCountsFromSending). A power-on that may
// have been carried out counts from then too (Observed.QuietFor), as one
// answered in its pass counts from its return: an Off reading taken less
// than StaleReads after the answer may echo the state before it
// (TestReview36ah_LateAnsweredPowerOnPressPressedAgainOnEcho). A
// power-off whose late answer is a refusal before it reached the hardware
// is undone, as one refused in its pass is: what was known of power-offs
// goes back to before the first power-off answered busy since the
// previous late answer, unless one carried out (or a power-on press whose
// answer was lost) came since, so that a refused soft press is retried
// soft (TestReview36ah_LateRefusedSoftPressBlocksRetryThenCutHard). A late answer that
// is itself lost (no protocol status: the IPMI adapter's lost datagram
// answer, a Pool's deadline) counts it as sent Config.LostLanding after
// then (A5, TestReview36m_LateLostAnswerClearsLostLanding); an answer
// settles only the lost call it is taken for, the first one answered
// busy since the previous late answer (one that ended in its own
// deadline, context.DeadlineExceeded, gets no late answer and stays
// lost: TestTrackerLateAnswerKeepsTimedOutPress). A Tracker's caller reports it
// with Tracker.Late.
type LateAnswerer interface {
	// LateAnswer returns, and forgets, the answer of the last power call
	// (On or Off) that ended after its pass was told busy, unless it was
	// taken already; ok is false if there is none.
	LateAnswer() (a LateAnswer, ok bool)
}

// late records the late answer a of a power call, taken at the
// controller's now and at mono on its monotonic clock, as a call that
// returned then; press: the call may have pressed the power button (a
// press this memory saw answered busy, or a mode the controller says
// toggles, or for a power-on a controller whose power-on may press). The call is the one answered busy since the previous late
// answer: its Call.For is their work (busyFor), unknown if this memory
// saw none.
func (h *memory) late(a LateAnswer, now time.Time, mono time.Duration, press bool) Call {
	work := h.busyFor
	h.busy, h.busyFor = false, Work{}
	was, undo := h.busyWas, h.busyWasSet
	h.busyWas, h.busyWasSet = offState{}, false
	on := a.Action == ActionPowerOn
	// It settles the call in flight (A5): one answered counts from now
	// (below), one whose answer was lost again may land LostLanding
	// after now. Other lost calls stay lost. A power-on that may press
	// (press, or the power-on in flight was one: sentOn) and whose late
	// answer is lost is a press that may land then, on a host that runs
	// by then (TestReview36o_LateLostPowerOnPressCountsFromPass).
	pressed := press || h.busyPress && !on || h.lost.flight.on && on
	h.lost.settle(on, answerLost(a.Err), pressed, mono)
	if on && pressed && answerLost(a.Err) {
		h.off.pressed(mono)
	}
	if on {
		h.onReturned(a.Err, mono)
	}
	if a.Action == ActionPowerOff && !notCarriedOut(a.Err) {
		o := &h.off
		o.noOff, o.lastOff = false, max(o.lastOff, mono)
		if press || h.busyPress {
			// Not known returned: its shutdown is over only SoftTimeout
			// + StaleReads after now (another press may be in flight).
			*o = offState{lastOff: o.lastOff, lastPress: max(o.lastPress, mono)}
		}
		h.busyPress = false
	}
	if notCarriedOut(a.Err) {
		// Refused before it reached the hardware: undone as sentOff
		// undoes a refusal answered in its pass, back to the memory
		// before the first call answered busy since the last late
		// answer, a power-off or a power-on press
		// (TestReview36ah_LateRefusedSoftPressBlocksRetryThenCutHard,
		// TestReview36ai_LateRefusedPowerOnPressHoldsSoftPress).
		if undo {
			h.off = was
		}
		h.busyPress = false
	}
	return h.called(Call{Action: a.Action, Mode: a.Mode, Class: CallClass(a.Err), At: now, For: work}, a.Err)
}

// answered records the outcome c of a power call answered in its pass
// (Sent, or the Reconciler's own call) and returns it with Repeats
// filled: one answered busy may go on in the background (LateAnswerer),
// and the work of those answered busy since the last late answer is the
// work of the call in flight (busyFor; unknown if they differ); one
// answered otherwise ran, so none was in flight.
func (h *memory) answered(c Call, err error) Call {
	switch {
	case c.Class != power.ClassBusy:
		h.busy, h.busyFor = false, Work{}
	case !h.busy:
		h.busy, h.busyFor = true, c.For
	case !h.busyFor.Is(c.For):
		h.busyFor = Work{}
	}
	return h.called(c, err)
}
