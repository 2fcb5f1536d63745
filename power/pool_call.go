package power

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// release ends a call on s; err is its outcome (nil: success). Calls
// never back a login off but in one case (the last below): a success (or an answer of the BMC) ends a
// back-off after failures that were not the credentials' (an
// authentication back-off ends with a successful login only, or a call
// that sent the credentials: CallAuthenticator); a refusal of the credentials
// (ErrAuth: the session is gone and a re-login was refused) retires the
// session, so that the next call logs in, under the back-off. So does
// a call that sent the credentials (CallAuthenticator) and ran out of
// time, unanswered, when no request with them was answered within the
// last LoginInterval (unansweredCallLocked), and it backs the login off;
// one that ran out of time unanswered earlier marks the session
// (timedOut), so that the next call does the same before it sends the
// credentials if by then nothing was answered within LoginInterval
// (acquireLocked).
// c: the call's state; once it was given up on, Close does not wait for it.
func (p *Pool) release(s *session, err error, c *callState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.released = true
	s.timedOut = timedOutUnanswered(err)
	switch {
	case errors.Is(err, ErrAuth):
		p.retireLocked(s)
	case s.authCalls && p.unansweredCallLocked(s.cr, err):
		p.retireLocked(s)
		p.unansweredBackoffLocked(s.cr, err)
	case (err == nil || answered(err)) && s.authCalls:
		p.succeededLocked(s.cr) // the call was a login, in effect
	case err == nil || answered(err):
		p.answeredLocked(s.cr)
	}
	p.doneLocked(s, c.abandoned)
}

// unansweredBackoffLocked backs the login of cr off after a call that
// sent the credentials and ran out of time unanswered
// (unansweredCallLocked; p.mu held): calls timing out together, or one
// given up on before it returned (abandon) and then released, back off
// once.
func (p *Pool) unansweredBackoffLocked(cr *creds, err error) {
	if p.backoffErrLocked("call", cr, p.cfg.Now()) != nil {
		return
	}
	p.failedLocked(cr, &Error{Op: "call", Class: ClassBusy, Err: err, Message: fmt.Sprintf(
		"the BMC answered no request with these credentials for %s (a password changed on the BMC that it refuses without answering, or a BMC that hangs): the hosts log in again",
		p.cfg.LoginInterval)})
}

// unansweredCallLocked reports whether err, the outcome of a call on a
// session of cr whose calls send the credentials, is a call that ran out
// of time without an answer while no request with the credentials was
// answered within the last LoginInterval (p.mu held): the BMC may be
// holding a refused password's requests back (a password rotated on the
// BMC after the hosts connected), and each further call would send it
// again. Another host's answered call on the same credentials (a dead
// blade beside healthy ones, a slow but working BMC) keeps the session.
// The login that follows tells a refusal (ErrUnanswered: AuthBackoff)
// from a BMC that hangs as a whole (a timeout: Backoff).
func (p *Pool) unansweredCallLocked(cr *creds, err error) bool {
	return timedOutUnanswered(err) && !cr.answeredAt.IsZero() && p.cfg.Now().Sub(cr.answeredAt) >= p.cfg.LoginInterval
}

// timedOutUnanswered reports whether err is a call's that ran out of
// time without an answer of the BMC's.
func timedOutUnanswered(err error) bool {
	return err != nil && !answered(err) && !errors.Is(err, ErrAuth) && errors.Is(err, context.DeadlineExceeded)
}

// callState is one call's, guarded by Pool.mu.
type callState struct {
	released  bool // release ran
	abandoned bool // given up on past its deadline
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
}

func (c *pooled) call(ctx context.Context, op string, f func(context.Context, Controller) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.p.cfg.CallTimeout)
	defer cancel()
	s, ctrl, err := c.p.acquire(ctx, op, c.host, c.t)
	if err != nil {
		return notSent{err}
	}
	res := make(chan error, 1)
	cs := &callState{}
	go func() {
		err := f(ctx, ctrl)
		c.p.release(s, err, cs)
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
	}
	// The controller does not honour its deadline: give up on its
	// session. It is closed once the call returns, and counts against the
	// BMC's sessions until then.
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case err := <-res:
		return err
	default:
	}
	if cs.released {
		return <-res // sent without the lock, at once
	}
	cs.abandoned = true
	p.abandonLocked(s)
	err = &Error{Op: op, Class: ClassBusy, Message: "the BMC did not answer before the deadline", Err: context.DeadlineExceeded}
	if s.authCalls && p.unansweredCallLocked(s.cr, err) {
		// As release would: the session is retired, and the next
		// call's login must wait as after a call that returned, not
		// send the refused credentials at once
		// (TestReview35_BasicAuthRotatedPasswordHeldCallsStorm).
		p.unansweredBackoffLocked(s.cr, err)
	}
	return err
}

// State reads the host's power state through the pool.
func (c *pooled) State(ctx context.Context) (State, error) {
	var s State
	err := c.call(ctx, "state", func(ctx context.Context, ctrl Controller) error {
		var err error
		s, err = ctrl.State(ctx)
		return err
	})
	if err != nil {
		return StateUnknown, err
	}
	return s, nil
}

// On powers the host on through the pool.
func (c *pooled) On(ctx context.Context) error {
	return c.call(ctx, "on", func(ctx context.Context, ctrl Controller) error { return ctrl.On(ctx) })
}

// Off powers the host off through the pool.
func (c *pooled) Off(ctx context.Context, m Mode) error {
	return c.call(ctx, OpName(m), func(ctx context.Context, ctrl Controller) error { return ctrl.Off(ctx, m) })
}

// OnChecked powers the host on through the pool (CheckedOner): the
// connected adapter's OnChecked, or an error matching ErrUnsupported (and
// ErrNotSent) if it has none. The pool's login, if one is needed, comes
// before the adapter's reads, so before check.
func (c *pooled) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.call(ctx, "on", func(ctx context.Context, ctrl Controller) error {
		o, ok := ctrl.(CheckedOner)
		if !ok {
			return &Error{Op: "on", Class: ClassUnsupported, Message: "the adapter cannot check before a power-on", Err: ErrNotSent}
		}
		return o.OnChecked(ctx, check)
	})
}

// Reset restarts the host through the pool (Resetter): the connected
// adapter's Reset, or an error matching ErrUnsupported if it has none.
func (c *pooled) Reset(ctx context.Context) error {
	return c.call(ctx, "reset", func(ctx context.Context, ctrl Controller) error {
		r, ok := ctrl.(Resetter)
		if !ok {
			return &Error{Op: "reset", Class: ClassUnsupported, Message: "the adapter cannot reset a server"}
		}
		return r.Reset(ctx)
	})
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
	if e := c.p.hosts[c.host]; e != nil {
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
	if e := c.p.hosts[c.host]; e != nil {
		ctrl = e.ctrl
	}
	c.p.mu.Unlock()
	if ctrl == nil {
		return true
	}
	t, ok := ctrl.(interface{ TogglesOn() bool })
	return ok && t.TogglesOn()
}
