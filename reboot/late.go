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
// the answer as the outcome of a call made now (Observed.LastCall,
// HardUnsupportedAt; what it knows of power-offs is unchanged: the call
// counted as sent, and a press as not returned): a hard power-off that a
// slow BMC answered unsupported still makes the next one soft. A Tracker's
// caller reports it with Tracker.Late.
type LateAnswerer interface {
	// LateAnswer returns, and forgets, the answer of the last power call
	// (On or Off) that ended after its pass was told busy, unless it was
	// taken already; ok is false if there is none.
	LateAnswer() (a LateAnswer, ok bool)
}

// late records the late answer a of a power call as a call that returned
// at the controller's now.
func (h *memory) late(a LateAnswer, now time.Time) Call {
	return h.called(Call{Action: a.Action, Mode: a.Mode, Class: CallClass(a.Err), At: now})
}
