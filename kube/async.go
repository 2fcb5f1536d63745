package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrInFlight: a BMC call of the host is still running in the background
// (a login or call to a slow or hung BMC); the reconcile pass did not wait
// for it. It wraps power.ErrBusy: the command may or may not take effect,
// and the next pass reads the state again. Async reconciles the host when
// the call ends.
var ErrInFlight = fmt.Errorf("kube: BMC call still running: %w", power.ErrBusy)

// ErrTaskOverdue: a power-on (or, through Async, a restart or a
// power-off that presses the power button) of the host
// that its BMC accepted for later (a Redfish 202 and its task) was
// followed for Async.TaskLimit (or Powers.TaskLimit) and its task had
// not ended, nor did the host read On: it may still take effect, so the host is left as it is (the error
// also wraps ErrInFlight, and says the fix; the RebootController reports
// it as a PowerTaskOverdue event).
var ErrTaskOverdue = errors.New("kube: a power command accepted for later has not ended")

// DefaultTaskLimit is Async.TaskLimit's default: how long a power
// command accepted for later is followed before the host is left as it
// is (ErrTaskOverdue).
const DefaultTaskLimit = 10 * time.Minute

// Async runs every BMC call (the login a first call makes included) in a
// goroutine of its own, one at a time per host (but a non-toggling
// power-off goes out beside a non-toggling power-off whose task is
// followed), and waits for it at most
// Wait: a reconcile worker never waits on a hung BMC for longer, whatever
// the number of hung BMCs. A call that takes longer goes on in the
// background under its own bounds (the pool's call and connect timeouts,
// the LeaseGuard's lease end if the controllers it runs are guarded),
// the pass gets ErrInFlight, further calls of that host get ErrInFlight at
// once until it ends, and Done is then told the host's name (the
// RebootController requeues it). A power reading that comes too late is
// never handed to a later pass: a reading is always taken during the call
// that returns it. The answer of a power-on or power-off that comes too
// late is kept for the next pass (reboot.LateAnswerer): a slow BMC's "hard
// power-off unsupported" makes the reboot controller power off soft. A
// command that may power the host on is written to the host's reboot
// record before it is sent, when the controller records (Powers.Controller:
// bookSend), and nothing is sent if that write fails; the record then
// follows its answer (removed, shortened, or given its task).
type Async struct {
	// Power gives a host's controller (Powers.Controller, guarded).
	Power func(name string) (power.Controller, error)
	// Wait bounds how long a pass waits for a call (default 250 ms).
	Wait time.Duration
	// Timeout bounds a background call (default 5 min); the controllers'
	// own bounds are normally shorter.
	Timeout time.Duration
	// Done, if set, is called with the host's name when a call that
	// outlived its pass ends (from the call's goroutine; it must not
	// block).
	Done func(name string)
	// TaskLimit bounds how long a power command the BMC accepted for
	// later (power.Queued: a Redfish 202 and its task) is followed
	// (default DefaultTaskLimit); TaskPoll is how often its task and
	// the host's power are read meanwhile (default 500 ms).
	TaskLimit, TaskPoll time.Duration

	mu       sync.Mutex
	inflight map[string]int               // how many calls of the host run (two only as offBeside lets)
	offTask  map[string]bool              // the host's running call is a non-toggling power-off whose task is followed
	resets   map[string]resetOutcome      // a Reset's outcome that came after its pass
	answers  map[string]reboot.LateAnswer // an On's or Off's answer that came after its pass
	ended    map[string]callEnd           // when the host's last call returned
	overdue  map[string]overdueCall       // a task followed past TaskLimit: why the host is left as it is
}

// overdueCall is a host's command whose task was followed past TaskLimit:
// why the host is left as it is, and the At of the booking that records
// it ("" if none does).
type overdueCall struct{ why, at string }

// callEnd is when a host's last call returned, and whether its answer
// was lost (an error that does not say the BMC did nothing: the command
// may still land).
type callEnd struct {
	at   time.Time
	lost bool
}

// Settled reports whether no call of host is in flight and its last call
// can no longer land: it returned, and, if its answer was lost, landing
// has passed since. until is the instant from which that holds (the
// return, or the return plus landing; zero if no call is known): a
// reading of the host's power counts only from then on.
func (a *Async) Settled(host string, landing time.Duration, now time.Time) (until time.Time, settled bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight[host] > 0 {
		return time.Time{}, false
	}
	e, ok := a.ended[host]
	if !ok {
		return time.Time{}, true
	}
	until = e.at
	if e.lost {
		until = until.Add(landing)
	}
	return until, !now.Before(until)
}

// lateReset returns (and forgets) the outcome of host's last Reset that
// ended after its pass gave up waiting, if any: the reset path persists
// it, so that an accepted reset is not sent again.
func (a *Async) lateReset(host string) (resetOutcome, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.resets[host]
	delete(a.resets, host)
	return o, ok
}

// Controller returns host name's controller (the signature of
// reboot.Reconciler.Power).
func (a *Async) Controller(name string) (power.Controller, error) {
	pc, err := a.Power(name)
	if err != nil {
		return nil, err
	}
	return &asyncController{a: a, host: name, pc: pc}, nil
}

// InFlight reports whether a call of host runs in the background.
func (a *Async) InFlight(host string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight[host] > 0
}

type asyncController struct {
	a    *Async
	host string
	pc   power.Controller
}

type result struct {
	state power.State
	err   error
}

// run starts f for the host unless a call of the host is in flight, and
// waits for it at most Wait (or ctx); cmd: f is a power command (its
// lost answer may land later: Settled), run with a power.Queued attached:
// one the BMC accepted for later stays in flight while follow follows it
// (want: the power state it is for, StateUnknown for a restart; toggles:
// it is a power-off that presses the power button, reboot.Toggler). One
// exception to one call at a time: a non-toggling power-off (a forced
// one, the fallback of a soft one) goes out beside a non-toggling
// power-off whose task is followed (a graceful shutdown the OS ignores
// must not hold back the fallback for TaskLimit: neither can power
// anything on).
func (c *asyncController) run(ctx context.Context, cmd bool, want power.State, toggles bool, f func(context.Context) (power.State, error),
	unsent func(error) (power.State, error)) (power.State, error) {
	a := c.a
	start := time.Now()
	offNoToggle := cmd && want == power.StateOff && !toggles
	a.clearOverdue(ctx, c)
	a.mu.Lock()
	if a.inflight == nil {
		a.inflight = map[string]int{}
	}
	if n := a.inflight[c.host]; n > 0 && (n > 1 || !offNoToggle || !a.offTask[c.host]) {
		a.mu.Unlock()
		return power.StateUnknown, fmt.Errorf("host %s: %w", c.host, ErrInFlight)
	}
	if od, ok := a.overdue[c.host]; ok {
		a.mu.Unlock()
		return power.StateUnknown, fmt.Errorf("%s: %w (%w)", od.why, ErrTaskOverdue, ErrInFlight)
	}
	a.inflight[c.host]++
	a.mu.Unlock()

	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	done := make(chan result, 1)
	var mu sync.Mutex
	waited := false // the pass gave up waiting: tell Done at the end
	go func() {
		// Not the pass's context: it ends with the pass.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		var q power.Queued
		if cmd {
			bg = power.WithQueued(bg, &q)
		}
		// A command that may power the host on is recorded in the host's
		// reboot record before it is sent (Powers.Controller's bookSend),
		// so that a restarted controller or a new leader holds the host
		// while it may land, also if this process stops between the
		// BMC's answer and its next write
		// (TestReview39aa_CrashBetween202AndBookingNewLeaderFences); a
		// booking that cannot be written sends nothing.
		var book taskBooker
		var bookedAt string
		var s power.State
		var err error
		if b, ok := c.pc.(taskBooker); ok && cmd && !offNoToggle {
			book = b
			deadline, _ := bg.Deadline()
			var berr error
			if bookedAt, berr = b.bookSend(bg, deadline.Add(a.taskLimit())); berr != nil {
				book = nil
				s, err = unsent(berr)
			}
		}
		if err == nil {
			s, err = f(bg)
		}
		cancel()
		lost := cmd && err != nil && !resetRefused(err)
		queued := cmd && err == nil && q.Queued()
		bctx := context.WithoutCancel(ctx)
		switch {
		case book != nil && queued:
			// Accepted for later: the booking says so (its task, Until
			// TaskLimit after now), so that every replica holds the
			// host until the task is seen to end
			// (TestReview39_QueuedOnOfNormalPathLandsAfterNewLeaderFences).
			bookedAt = book.bookTask(bctx, bookedAt, q.Monitor(), time.Now().Add(a.taskLimit()))
		case book != nil && commandAnswered(err):
			book.sendAnswered(bctx, bookedAt) // it can no longer land
		case book != nil:
			book.sendLost(bctx, bookedAt) // it may land for LostLanding
		}
		if queued && a.following(ctx, c, &q, want, offNoToggle) {
			if book != nil {
				book.taskEnded(bctx, bookedAt) // the record's hold ends StaleReads after now
			}
		} else if queued {
			// Accepted for later, and its task not seen to end within
			// TaskLimit (TestReview39_QueuedOnOfNormalPathTakenAsLanded
			// for the wait): it may still take effect, so its answer
			// counts as lost (Settled waits landing more) and is not
			// handed over; a power-on, a restart (which may power on a
			// host that is off) or a press of the power button (which
			// powers on a host that is off by then:
			// TestReview39_QueuedPressOffOverdueLetsHardOffThenPowersOn)
			// leaves the host as it is for good (a power-off that is no
			// toggle powers nothing on if it is carried out later).
			lost = true
			a.mu.Lock()
			delete(a.answers, c.host)
			if want != power.StateOff || toggles {
				if a.overdue == nil {
					a.overdue = map[string]overdueCall{}
				}
				od := overdueCall{why: "restart rebootkit-controller"} // no booking records it
				if book != nil && bookedAt != "" {
					od = overdueCall{at: bookedAt, why: "rebootkit reads its monitor past the reboot record's wait and lets the host go " +
						"once it reads it ended (or remove that wait, the record's spec.powerOnSent)"}
				}
				od.why = fmt.Sprintf("host %s: a power-on, restart or power-button press its BMC accepted as a task (%s) has not ended "+
					"after %s, so it may still take effect: the host is left as it is; once that task ended or was cancelled on the BMC "+
					"(a GET of it answers Completed, Exception, Killed or Cancelled), %s", c.host, cmp.Or(q.Monitor(), noTaskNamed), a.taskLimit(), od.why)
				a.overdue[c.host] = od
			}
			a.mu.Unlock()
		}
		a.mu.Lock()
		if a.inflight[c.host]--; a.inflight[c.host] <= 0 {
			delete(a.inflight, c.host)
		}
		if a.ended == nil {
			a.ended = map[string]callEnd{}
		}
		if e, ok := a.ended[c.host]; ok && e.lost && !e.at.Before(start) {
			lost = true // a call beside this one lost its answer meanwhile: it may still land
		}
		a.ended[c.host] = callEnd{at: time.Now(), lost: lost}
		a.mu.Unlock()
		done <- result{s, err}
		mu.Lock()
		late := waited
		mu.Unlock()
		if late && a.Done != nil {
			a.Done(c.host)
		}
	}()
	wait := a.Wait
	if wait <= 0 {
		wait = 250 * time.Millisecond
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-done:
		return r.state, r.err
	case <-t.C:
	case <-ctx.Done():
	}
	mu.Lock()
	select {
	case r := <-done: // ended meanwhile
		mu.Unlock()
		return r.state, r.err
	default:
	}
	waited = true
	mu.Unlock()
	return power.StateUnknown, fmt.Errorf("host %s: %w", c.host, ErrInFlight)
}

func (c *asyncController) State(ctx context.Context) (power.State, error) {
	return c.run(ctx, false, power.StateUnknown, false, c.pc.State, nil)
}

func (c *asyncController) On(ctx context.Context) error {
	return c.call(ctx, reboot.LateAnswer{Action: reboot.ActionPowerOn}, false, c.pc.On)
}

// OnChecked runs the host's checked power-on (power.CheckedOner) as On
// runs.
func (c *asyncController) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.call(ctx, reboot.LateAnswer{Action: reboot.ActionPowerOn}, false,
		func(ctx context.Context) error { return onCheckedOf(ctx, c.pc, check) })
}

func (c *asyncController) Off(ctx context.Context, m power.Mode) error {
	return c.call(ctx, reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: m}, togglesOff(c.pc, m),
		func(ctx context.Context) error { return c.pc.Off(ctx, m) })
}

// call runs the power call f (described by la; toggles: a power-off
// that is a press of the power button) as run does, and keeps its answer
// for LateAnswer if it comes after the pass stopped waiting.
func (c *asyncController) call(ctx context.Context, la reboot.LateAnswer, toggles bool, f func(context.Context) error) error {
	want := power.StateOn
	if la.Action == reboot.ActionPowerOff {
		want = power.StateOff
	}
	answer := func(err error) (power.State, error) {
		la.Err = err
		c.a.mu.Lock()
		if c.a.answers == nil {
			c.a.answers = map[string]reboot.LateAnswer{}
		}
		c.a.answers[c.host] = la
		c.a.mu.Unlock()
		return power.StateUnknown, la.Err
	}
	_, err := c.run(ctx, true, want, toggles, func(ctx context.Context) (power.State, error) { return answer(f(ctx)) }, answer)
	if !isInFlight(err) {
		c.LateAnswer() // answered within the pass: the caller has it
	}
	return err
}

// LateAnswer returns, and forgets, the answer of the host's last power-on
// or power-off that ended after its pass was told ErrInFlight
// (reboot.LateAnswerer).
func (c *asyncController) LateAnswer() (reboot.LateAnswer, bool) {
	c.a.mu.Lock()
	defer c.a.mu.Unlock()
	la, ok := c.a.answers[c.host]
	delete(c.a.answers, c.host)
	return la, ok
}

var _ reboot.LateAnswerer = (*asyncController)(nil)

// TogglesOff passes on the wrapped controller's reboot.Toggler (false if
// it has none), so that the reboot controller's press rule applies: a
// soft power-off through Async may still be a press of the power button.
// It asks the wrapped controller at once (no BMC call).
func (c *asyncController) TogglesOff(m power.Mode) bool { return togglesOff(c.pc, m) }

// TogglesOn passes on the wrapped controller's reboot.OnToggler (false if
// it has none). It asks the wrapped controller at once (no BMC call).
func (c *asyncController) TogglesOn() bool { return togglesOn(c.pc) }

// Reset runs the host's Reset (power.Resetter) as the other calls run; an
// outcome that comes after the pass gave up is kept for the reset path
// (lateReset).
func (c *asyncController) Reset(ctx context.Context) error {
	outcome := func(err error) (power.State, error) {
		c.a.mu.Lock()
		if c.a.resets == nil {
			c.a.resets = map[string]resetOutcome{}
		}
		c.a.resets[c.host] = resetOutcome{at: time.Now(), err: err}
		c.a.mu.Unlock()
		return power.StateUnknown, err
	}
	_, err := c.run(ctx, true, power.StateUnknown, false, func(ctx context.Context) (power.State, error) { return outcome(resetOf(ctx, c.pc)) }, outcome)
	if !isInFlight(err) {
		c.a.lateReset(c.host) // answered within the pass: the caller has it
	}
	return err
}

func isInFlight(err error) bool { return errors.Is(err, ErrInFlight) }

// clearOverdue drops host c's overdue task once the record no longer
// shows its booking unended (taskBooker.bookingOver: its task read ended
// by any replica, stamped Returned, or the booking removed): the host's
// controller (Powers.Controller) then holds it as the record says
// (sentHold). One no booking records stays until the process restarts.
func (a *Async) clearOverdue(ctx context.Context, c *asyncController) {
	a.mu.Lock()
	od, ok := a.overdue[c.host]
	a.mu.Unlock()
	b, booker := c.pc.(taskBooker)
	if !ok || od.at == "" || !booker || !b.bookingOver(ctx, od.at) {
		return
	}
	a.mu.Lock()
	if a.overdue[c.host] == od {
		delete(a.overdue, c.host)
	}
	a.mu.Unlock()
}

// forgetHost drops what a keeps of host, which is gone (RebootController's
// forget): its late answers and the end of its last call, unless that
// call's answer was lost (it may still land on a host created again under
// that name: Settled). A call in flight keeps its entries, and an overdue
// task stays (it may still land).
func (a *Async) forgetHost(host string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight[host] > 0 {
		return
	}
	delete(a.answers, host)
	delete(a.resets, host)
	if e, ok := a.ended[host]; ok && !e.lost {
		delete(a.ended, host)
	}
}

func (a *Async) taskLimit() time.Duration { return cmp.Or(a.TaskLimit, DefaultTaskLimit) }

// following follows c's command q as follow does; offNoToggle: it is a
// non-toggling power-off, beside whose task run lets a non-toggling
// power-off go out meanwhile.
func (a *Async) following(ctx context.Context, c *asyncController, q *power.Queued, want power.State, offNoToggle bool) bool {
	if offNoToggle {
		a.mu.Lock()
		if a.offTask == nil {
			a.offTask = map[string]bool{}
		}
		a.offTask[c.host] = true
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			delete(a.offTask, c.host)
			a.mu.Unlock()
		}()
	}
	return a.follow(context.WithoutCancel(ctx), c, q, want)
}

// follow reads, every TaskPoll, whether the task of c's command q noted
// ended, or the host reads want, for at most TaskLimit (followTask).
func (a *Async) follow(ctx context.Context, c *asyncController, q *power.Queued, want power.State) bool {
	return followTask(ctx, q, c.pc.State, want, cmp.Or(a.TaskPoll, 500*time.Millisecond), a.taskLimit())
}

// followTask reads, every poll, whether the task of the command q noted
// (power.Queued.TaskEnded) ended, and whether state reads want (not
// StateUnknown), until one says so (true) or limit passed (false), or
// ctx ended (false). Each round of readings is bounded by 10 s (poll if
// longer) and the reader's own bounds.
func followTask(ctx context.Context, q *power.Queued, state func(context.Context) (power.State, error), want power.State, poll, limit time.Duration) bool {
	end := time.Now().Add(limit)
	for {
		rctx, cancel := context.WithTimeout(ctx, max(poll, 10*time.Second))
		ended, _ := q.TaskEnded(rctx)
		if !ended && want != power.StateUnknown {
			s, err := state(rctx)
			ended = err == nil && s == want
		}
		cancel()
		if ended {
			return true
		}
		if !time.Now().Before(end) {
			return false
		}
		t := time.NewTimer(min(poll, time.Until(end)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}
