package inventory

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
)

// TestJobStateMachineAbandons is TestJobStateMachine with the operator's
// abandons drawn mid-run, as rebootctl makes them: "plan abandon PLAN
// SERVER" for any plan and server (recorded, one per server, the latest
// wins), applied again by the executor before every pass; the operator
// powering on by hand a server they abandoned while it is off; and the
// executor's own server rebooting through its OS as a real one does: its
// reboot command lands after a drawn delay (shutdown -r +N, a slow
// shutdown; within ShutdownMax), the server is off a drawn while (counted
// by maxOff, ground truth), and its boot ID changes when it is back.
// Every invariant of TestJobStateMachine is kept, at most concurrency
// servers off at every instant first among them (with an instant reboot,
// an abandon of the executor's own server after its reboot command ran
// freed its slot, and the reboot landed while the plan had powered off
// another server: issue 38, review round 4).
func TestJobStateMachineAbandons(t *testing.T) {
	jobStateMachineWith(t, machine{abandons: true})
}

// TestJobStateMachineAbandonsSlowProbes is TestJobStateMachineAbandons
// with slow health probes (a probe reads the server when it starts and
// answers up to 40 s later), as the executor's background checks are: the
// take-back and settle rules rest on when a passing check began.
func TestJobStateMachineAbandonsSlowProbes(t *testing.T) {
	jobStateMachineWith(t, machine{abandons: true, slowProbes: true})
}

// TestJobStateMachineAbandonsTwoExecutors is TestJobStateMachineAbandons
// with TestJobStateMachineTwoExecutors' second executor and clock moves
// between every crash and its restart.
func TestJobStateMachineAbandonsTwoExecutors(t *testing.T) {
	jobStateMachineWith(t, machine{abandons: true, two: true})
}

// osDelay is how the executor's own server reboots through its OS: the
// reboot lands land after its command, and the server is off for down.
type osDelay struct{ land, down time.Duration }

// osEvent is a step of a reboot through the OS: at (real time) server
// goes off (up false) or comes back on with a new boot ID (up true).
type osEvent struct {
	at     time.Time
	server string
	up     bool
}

// scheduleOSReboot schedules server's reboot through its OS, its command
// having run now; a reboot already under way is not pushed back (the
// fleet never runs the command twice on one boot).
func (w *world) scheduleOSReboot(server string) {
	if w.osRebooting(server) {
		return
	}
	w.osEvents = append(w.osEvents, osEvent{at: w.clk.Real().Add(w.osDelay.land), server: server})
}

// osRebooting reports whether server's reboot through its OS is under way
// (scheduled, or off until its new boot).
func (w *world) osRebooting(server string) bool {
	for _, e := range w.osEvents {
		if e.server == server {
			return true
		}
	}
	return false
}

// advance moves the clocks by d, applying each OS reboot step at its
// instant (ground truth). Without one due it is w.clk.Advance(d).
func (w *world) advance(d time.Duration) {
	end := w.clk.Real().Add(d)
	for {
		k := -1
		for i, e := range w.osEvents {
			if !e.at.After(end) && (k < 0 || e.at.Before(w.osEvents[k].at)) {
				k = i
			}
		}
		if k < 0 {
			break
		}
		e := w.osEvents[k]
		w.osEvents = append(w.osEvents[:k:k], w.osEvents[k+1:]...)
		if e.at.After(w.clk.Real()) {
			w.clk.Advance(e.at.Sub(w.clk.Real()))
		}
		p := w.bmcs[e.server].p
		if e.up {
			if !p.HardwareOn() {
				p.OutOfBandOn()
			}
			w.boot[e.server] += "+"
			continue
		}
		if p.HardwareOn() {
			p.OutOfBandOff()
		}
		w.osEvents = append(w.osEvents, osEvent{at: e.at.Add(w.osDelay.down), server: e.server, up: true})
	}
	if end.After(w.clk.Real()) {
		w.clk.Advance(end.Sub(w.clk.Real()))
	}
}

// move makes a drawn clock move, a step through advance (OS reboots
// land on time).
func (w *world) move(m fake.ClockMove) {
	if m.Kind == fake.ClockStep {
		w.advance(m.D)
		return
	}
	w.clk.Apply(m)
}
