package power

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/internal/clockctx"
)

// release ends a call on s; err is its outcome (nil: success). A success
// (or an answer of the BMC) ends a back-off after failures that were not
// the credentials' (an authentication back-off ends with a successful
// login only, or a call that sent the credentials: CallAuthenticator); a
// refusal of the credentials (ErrAuth: a re-login inside the call was
// refused, or the BMC refused credentials the call sent) retires the
// session and backs their next login off (refusedInCallLocked); a
// refusal of this host's own system while the BMC answers the
// credentials (ErrSystemRefused: the adapter asked the BMC) backs this
// host alone off and keeps the session for the others.
// c: the call's state; once it was given up on, Close does not wait for it.
func (p *Pool) release(s *session, err error, c *callState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.released = true
	if errors.Is(err, ErrNotSent) && !c.note.asked && !errors.Is(err, ErrAuth) &&
		!errors.Is(err, ErrSystemRefused) && !answered(err) {
		// The command was not sent, and no request of the call was
		// answered or refused (a read before it): the window's fence is
		// still to come
		// (TestReview35ar_CancelledFenceRefusesFenceForMinutes).
		p.giveBackFenceLocked(&c.fence)
	}
	p.timedOutLocked(s, err, c.host, c.pc)
	switch {
	case c.note.unknownLocked() && !errors.Is(err, ErrSystemRefused):
		// Refused, and the check of the credentials proved nothing (cut,
		// unanswered, no authenticated answer): the host's own, as far
		// as the Pool can tell; the session and the credentials stay, not
		// proven (TestReview35ap_CallerCancelDuringCheckBacksNeighboursOff).
		if e := p.hostLocked(c.host, c.pc); e != nil && e.sess == s {
			p.ownAuthLocked(e, uncheckedRefusal{err})
		}
	case errors.Is(err, ErrAuth):
		if !p.refusedInCallLocked(s, err, c) {
			p.retireLocked(s)
		}
	case errors.Is(err, ErrSystemRefused):
		if s.authCalls {
			p.succeededLocked(s.cr) // the BMC answered the credentials the call sent
		} else {
			p.answeredLocked(s.cr)
		}
		if e := p.hostLocked(c.host, c.pc); e != nil && e.sess == s {
			p.ownAuthLocked(e, err)
		}
	case (err == nil || answered(err)) && s.authCalls:
		p.answeredHostLocked(c.host, c.pc)
		p.succeededLocked(s.cr) // the call was a login, in effect
	case err == nil || answered(err):
		p.answeredHostLocked(c.host, c.pc)
		p.answeredLocked(s.cr)
	}
	p.doneLocked(s, c.abandoned)
}

// refusedInCallLocked records the ErrAuth err of host c.host's call on
// s (p.mu held) and reports whether it is the host's own (then the
// session stays, for the hosts sharing it; else the caller retires it):
// nothing, if it is counted already or was not tried (s retired by an
// earlier refusal, ErrBackoff, a login with the credentials refused
// while the call ran: the gate counted it, or a check that refused them:
// Pool.check counted it); this host's own, on a
// session with a token (not CallAuthenticator) if a login with the
// credentials succeeded while the call ran (a re-login inside it, whose
// retry was refused again: a 401 after it is the host's system's): the
// host backs off alone (ownAuthLocked: its calls are refused, its
// session or not, until it ends); else a refusal of the credentials (a
// re-login inside the call that bypassed the gate, or basic auth
// refused and not checked), which backs their next login off as a
// refused login does.
func (p *Pool) refusedInCallLocked(s *session, err error, c *callState) (own bool) {
	cr := s.cr
	switch {
	case s.retired, errors.Is(err, ErrBackoff), cr.loginsFailed != c.loginsFailed, c.note.countedLocked():
	case !s.authCalls && cr.loginsOK != c.loginsOK:
		if e := p.hostLocked(c.host, c.pc); e != nil && e.sess == s {
			p.ownAuthLocked(e, err)
			return true
		}
	default:
		p.failedLocked(cr, err)
	}
	return false
}

// answeredHostLocked notes that the BMC answered host's call through
// Controller pc (p.mu held), which ends host's own back-off after a
// refusal (ownAuthLocked).
func (p *Pool) answeredHostLocked(host string, pc *pooled) {
	if e := p.hostLocked(host, pc); e != nil && ownRefusal(e.ownLast) {
		e.ownFails, e.ownLast = 0, nil
	}
}

// ownRefusal reports whether err, a host's own last failure, is a
// refusal by the BMC (ErrAuth, ErrSystemRefused): the host backs off
// alone, its open session or not (ownAuthLocked).
func ownRefusal(err error) bool {
	if err == nil {
		return false // at every call: nothing to allocate (errors.As)
	}
	var u uncheckedRefusal
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrSystemRefused) || errors.As(err, &u)
}

// uncheckedRefusal is a host's own last failure (entry.ownLast): a
// refusal whose check of the credentials proved nothing (VerdictUnknown).
// The host backs off alone, as after ErrSystemRefused, and its power
// commands are still tried, one per back-off window (fenceTriedLocked). It reads and matches as err.
type uncheckedRefusal struct{ err error }

func (e uncheckedRefusal) Error() string { return e.err.Error() }

func (e uncheckedRefusal) Unwrap() error { return e.err }

// timedOutLocked records, for a session whose calls send the
// credentials (CallAuthenticator), whether the call of host (through
// Controller pc) on s that ended with err ran out of time unanswered
// (heldReadLocked; p.mu held).
func (p *Pool) timedOutLocked(s *session, err error, host string, pc *pooled) {
	if !s.authCalls {
		return
	}
	out := timedOutUnanswered(err)
	if out {
		s.cr.unansweredAt = p.cfg.Now()
	}
	if e := p.hostLocked(host, pc); e != nil && e.sess == s {
		e.unanswered = out
		e.calledAt = p.cfg.Now()
	}
}

// timedOutUnanswered reports whether err is a call's that ran out of
// time without an answer of the BMC's.
func timedOutUnanswered(err error) bool {
	return err != nil && !answered(err) && !errors.Is(err, ErrAuth) && errors.Is(err, context.DeadlineExceeded)
}

// heldReadLocked returns the error of a read (a State call: never a
// power command) of host entry e on its open session s that is not sent
// (p.mu held), or nil. A session whose calls send the credentials
// (CallAuthenticator: basic auth) sends them with every read: when e's
// own last call ran out of time unanswered, and so did the last call with
// these credentials, and none with them was answered within
// LoginInterval (a password rotated on the BMC, which holds the refused
// requests back unanswered; or dead blades beside a host's one slow
// moment), the reads of such hosts are held: one is sent a pause apart
// (AuthBackoff; doubled for each one sent and left unanswered since, up
// to MaxAuthBackoff, only when the last failure of these credentials was
// an authentication failure: without that evidence an unanswered read
// may be an outage, and a BMC back from one is read again within
// AuthBackoff, TestReview35_BasicAuthOutageHoldsReadsLongAfter), and the
// others are not (ErrBackoff, ErrNotSent). The read a pause allows is a
// turn among the hosts whose reads are held (pool_turn.go): it goes to
// the host that had it longest ago; and a host whose own last call is a
// whole round old (a pause per host waiting for the turn) is sent beside
// it, one such per pause: so at most two such reads a pause, and a dead
// blade polled every few seconds never takes the read of a healthy host
// checked every few minutes, whose answer then ends the hold
// (TestReview35aa_BasicAuthDeadNeighbourHoldsHealthyReadsForEver). An
// answer to any request with the credentials ends it. Nothing is closed
// (a session may have hosts joining it), and a power command is always
// sent: it may be the fence of a healthy host beside a dead one
// (TestReview35_BasicAuthRotatedPasswordHeldCallsStorm,
// TestReview35_NeighbourTimeoutThenQuietRefusesHealthyFence).
func (p *Pool) heldReadLocked(op string, e *entry, s *session) error {
	cr := s.cr
	now := p.cfg.Now()
	if isCommandOp(op) {
		return nil
	}
	if !s.authCalls || !e.unanswered || !cr.unansweredAt.After(cr.answeredAt) || now.Sub(cr.answeredAt) < p.cfg.LoginInterval {
		leaveTurnLocked(&cr.held, &e.held) // not held
		return nil
	}
	first := p.askTurnLocked(&cr.held, &e.held, now)
	d := p.cfg.AuthBackoff
	for i := 0; cr.auth && i < cr.heldProbes && d < p.cfg.MaxAuthBackoff; i++ {
		d *= 2
	}
	d = min(d, p.cfg.MaxAuthBackoff)
	// A whole round: one pause per host waiting for the turn.
	round := time.Duration(len(cr.held.h)) * d
	switch {
	case first && !now.Before(cr.heldUntil):
		cr.heldUntil = now.Add(d) // the pause's read
	case now.Sub(e.calledAt) >= round && !now.Before(cr.roundUntil):
		cr.roundUntil = now.Add(d) // the read of a host that waited a whole round
	default:
		next := "the next goes out in " + cr.heldUntil.Sub(now).Round(time.Millisecond).String()
		if !now.Before(cr.heldUntil) {
			next = "the next goes to a host whose turn came first"
		}
		return &Error{Op: op, Class: ClassBusy,
			Message: fmt.Sprintf("not sent: this host's last call ran out of time unanswered, and the BMC has answered no request with these credentials for %s: it is probed with one read of such a host a pause apart, in turn (%s). Check that the BMC is up and answers, and whether its password was changed (then update the host's credentials)",
				now.Sub(cr.answeredAt).Round(time.Second), next),
			Err: errHeld}
	}
	tookTurnLocked(&cr.held, &e.held, now)
	cr.heldProbes++
	return nil
}

// errHeld is the cause of a held read's error (heldReadLocked): it
// matches ErrBackoff, but says what happened (no login failed).
var errHeld error = heldErr{}

type heldErr struct{}

func (heldErr) Error() string {
	return "power: not sent, reads with these credentials go to the BMC one at a time after unanswered ones"
}

func (heldErr) Is(target error) bool { return target == ErrBackoff }

// callState is one call's, guarded by Pool.mu but for what is set
// before its goroutine starts (pooled.call). It is the context the
// controller's call gets: the caller's, bounded by CallTimeout and by the
// clock (clockctx), and carrying the call's CallInfo (Value).
type callState struct {
	context.Context                               // the caller's, with the call's deadline
	pc                     *pooled                // the Controller called
	host                   string                 // pc.host
	op                     string                 // the operation's name (Error.Op)
	do                     func(*callState) error // the operation, on ctrl
	released               bool                   // release ran
	loginsOK, loginsFailed uint64                 // the creds' counts when the call began
	abandoned              bool                   // given up on past its deadline
	note                   checkNote
	fence                  fenceHold // the back-off window's fence pass it took, if any
	// Set before the call's goroutine starts: its session and
	// controller, its credentials, whether a refusal is checked
	// (checkAskedLocked) and cr.checksDone then.
	s        *session
	ctrl     Controller
	cr       *creds
	checkAsk bool
	began    uint64
	err      error         // the operation's error, once done is closed
	done     chan struct{} // closed once the operation is released
	// The operation's argument and result.
	mode    Mode
	monitor string
	onCheck func(context.Context) error
	state   State
	task    TaskReading
}

// Err is the context's error, or context.DeadlineExceeded once the clock
// is past its deadline although its timer has not fired yet (a Guard's
// context ended by a pause: reboot.ClockBound).
func (cs *callState) Err() error { return clockctx.Err(cs.Context) }

// Value is the context's value for key: the call's CallInfo
// (CallInfoFrom), made when the controller asks for it (on a refusal),
// not at every call.
func (cs *callState) Value(key any) any {
	if _, ok := key.(callInfoKey); ok {
		if !cs.checkAsk {
			return CallInfo{}
		}
		return CallInfo{CheckRefusal: true, Check: cs.check}
	}
	return cs.Context.Value(key)
}

// check is the call's CallInfo.Check.
func (cs *callState) check(ctx context.Context, read func(context.Context) Verdict) Verdict {
	return cs.pc.p.noteCheck(ctx, cs.cr, cs.began, &cs.note, read)
}

// run runs the call's operation on its controller, releases its session,
// and hands its error to the caller.
func (cs *callState) run() {
	err := cs.do(cs)
	cs.pc.p.release(cs.s, err, cs)
	cs.err = err
	close(cs.done)
}

// answered reports whether err is an answer of the BMC's (a status, or a
// refusal of the operation): the BMC is there.
func answered(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && (pe.Status != 0 || pe.Class == ClassUnsupported) && !errors.Is(err, ErrAuth)
}

// pooled is the Controller the Pool hands out.
type pooled struct {
	p    *Pool
	host string
	t    Target
	// e: host's entry its last call found (guarded by p.mu), taken
	// again without a lookup while it is the host's (not gone: Forget,
	// or another Target for host, drops it and sets gone); it is made
	// for t, which does not change (hostLocked, cachedEntryLocked).
	e *entry
}

// hostLocked returns host's entry (p.mu held), as p.hosts[host], from
// pc's cached entry while it is the host's (pc may be nil).
func (p *Pool) hostLocked(host string, pc *pooled) *entry {
	if pc != nil && pc.e != nil && !pc.e.gone {
		return pc.e
	}
	return p.hosts[host]
}

// deadline returns the call's context: ctx bounded by CallTimeout, and
// its cancel (nil if ctx's own deadline comes first: it is used as it
// is, with nothing to allocate).
func (c *pooled) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := time.Now().Add(c.p.cfg.CallTimeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx, nil
	}
	return context.WithDeadline(ctx, d)
}

func (c *pooled) call(ctx context.Context, cs *callState) error {
	ctx, cancel := c.deadline(ctx)
	if cancel != nil {
		defer cancel()
	}
	// The derived context's Err sees the caller's deadline only when its
	// timer fires: cs's Err bounds it by the clock, so that a Guard's
	// context (reboot.ClockBound) ended by a pause still ends the call
	// here.
	cs.Context, cs.pc, cs.host = ctx, c, c.host
	op := cs.op
	s, ctrl, err := c.p.acquire(cs, op, c.host, c.t, &cs.fence, &c.e)
	if err != nil {
		return notSent{err}
	}
	cs.s, cs.ctrl, cs.done = s, ctrl, make(chan struct{})
	c.p.mu.Lock()
	cs.cr = s.cr
	cs.loginsOK, cs.loginsFailed = s.cr.loginsOK, s.cr.loginsFailed
	// Other hosts use these credentials: a refusal of this host's system
	// taken for theirs would back the neighbours off too.
	cs.checkAsk = c.p.checkAskedLocked(s.cr)
	cs.began = s.cr.checksDone
	c.p.mu.Unlock()
	done := cs.done
	go cs.run()
	select {
	case <-done:
		return cs.err
	case <-cs.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-done:
		return cs.err
	case <-t.C:
	}
	// The controller does not honour its deadline: give up on its
	// session. It is closed once the call returns, and counts against the
	// BMC's sessions until then.
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-done:
		return cs.err
	default:
	}
	if cs.released {
		<-done // closed without the lock, at once
		return cs.err
	}
	cs.abandoned = true
	p.abandonLocked(s)
	err = &Error{Op: op, Class: ClassBusy, Message: "the BMC did not answer before the deadline", Err: context.DeadlineExceeded}
	p.timedOutLocked(s, err, c.host, c)
	return err
}

// State reads the host's power state through the pool.
func (c *pooled) State(ctx context.Context) (State, error) {
	cs := &callState{op: "state", do: doState}
	if err := c.call(ctx, cs); err != nil {
		return StateUnknown, err
	}
	return cs.state, nil
}

func doState(cs *callState) error {
	var err error
	cs.state, err = cs.ctrl.State(cs)
	return err
}

// On powers the host on through the pool.
func (c *pooled) On(ctx context.Context) error {
	return c.call(ctx, &callState{op: "on", do: doOn})
}

func doOn(cs *callState) error { return cs.ctrl.On(cs) }

// Off powers the host off through the pool.
func (c *pooled) Off(ctx context.Context, m Mode) error {
	return c.call(ctx, &callState{op: OpName(m), do: doOff, mode: m})
}

func doOff(cs *callState) error { return cs.ctrl.Off(cs, cs.mode) }

// OnChecked powers the host on through the pool (CheckedOner): the
// connected adapter's OnChecked, or an error matching ErrUnsupported (and
// ErrNotSent) if it has none. The pool's login, if one is needed, comes
// before the adapter's reads, so before check.
func (c *pooled) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.call(ctx, &callState{op: "on", do: doOnChecked, onCheck: check})
}

func doOnChecked(cs *callState) error {
	o, ok := cs.ctrl.(CheckedOner)
	if !ok {
		return &Error{Op: "on", Class: ClassUnsupported, Message: "the adapter cannot check before a power-on", Err: ErrNotSent}
	}
	return o.OnChecked(cs, cs.onCheck)
}

// ReadTask reads a task monitor of the host's BMC through the pool
// (TaskReader), as State reads its power: the connected adapter's
// ReadTask, or an error matching ErrUnsupported if it has none.
func (c *pooled) ReadTask(ctx context.Context, monitor string) (TaskReading, error) {
	cs := &callState{op: "task", do: doReadTask, monitor: monitor, task: TaskNotEnded}
	if err := c.call(ctx, cs); err != nil {
		return TaskNotEnded, err
	}
	return cs.task, nil
}

func doReadTask(cs *callState) error {
	tr, ok := cs.ctrl.(TaskReader)
	if !ok {
		return &Error{Op: "task", Class: ClassUnsupported, Message: "the adapter cannot read a task monitor"}
	}
	var err error
	cs.task, err = tr.ReadTask(cs, cs.monitor)
	return err
}

// Reset restarts the host through the pool (Resetter): the connected
// adapter's Reset, or an error matching ErrUnsupported if it has none.
func (c *pooled) Reset(ctx context.Context) error {
	return c.call(ctx, &callState{op: "reset", do: doReset})
}

func doReset(cs *callState) error {
	r, ok := cs.ctrl.(Resetter)
	if !ok {
		return &Error{Op: "reset", Class: ClassUnsupported, Message: "the adapter cannot reset a server"}
	}
	return r.Reset(cs)
}

// notSent is the error of a call the Pool never handed to a controller
// (no session: a login that failed, backs off, is still running, or
// waits for a free session): it matches ErrNotSent and everything err
// matches, and reads as err.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }

func (e notSent) Unwrap() []error { return []error{ErrNotSent, e.err} }

// TogglesOff reports whether Off in mode m may be a press of the power
// button (the reboot package's Toggler): what the host's connected
// controller says, false if it cannot toggle, and true while the host is
// not connected (the adapter is not known yet, so a press is assumed).
func (c *pooled) TogglesOff(m Mode) bool {
	c.p.mu.Lock()
	var ctrl Controller
	if e := c.p.hostLocked(c.host, c); e != nil {
		ctrl = e.ctrl
	}
	c.p.mu.Unlock()
	if ctrl == nil {
		return true
	}
	t, ok := ctrl.(interface{ TogglesOff(Mode) bool })
	return ok && t.TogglesOff(m)
}

// TogglesOn reports whether On may be a press of the power button (the
// reboot package's OnToggler): what the host's connected controller says,
// false if it cannot toggle, and true while the host is not connected.
func (c *pooled) TogglesOn() bool {
	c.p.mu.Lock()
	var ctrl Controller
	if e := c.p.hostLocked(c.host, c); e != nil {
		ctrl = e.ctrl
	}
	c.p.mu.Unlock()
	if ctrl == nil {
		return true
	}
	t, ok := ctrl.(interface{ TogglesOn() bool })
	return ok && t.TogglesOn()
}
