package power

import (
	"context"
	"errors"
	"time"
)

// attach makes e's controller on shared session s (p.mu held on entry,
// released). The join runs as a login does: on its own goroutine, bounded
// by ConnectTimeout only; a caller that gives up waiting gets a busy error
// at once, and the join goes on, its outcome counted and its controller
// kept for the next call (the caller's cancellation or deadline is not
// the BMC's failure). A join is no use of the session: the session stays
// on the idle list with its last use unchanged, and is not closed while
// the join runs (s.joins). again: look at e afresh (the adapter declined,
// or s went away meanwhile).
func (p *Pool) attach(ctx context.Context, op string, e *entry, s *session) (_ *session, _ Controller, _ error, again bool) {
	e.connecting = true
	s.joins++
	// A refused re-login the adapter made meanwhile (through the gate,
	// power/redfish's share) is counted already.
	authFailures := e.cr.authFailures
	jctx, cancel := context.WithTimeout(WithConnectInfo(context.WithoutCancel(ctx), ConnectInfo{Shared: s.ctrl, Gate: p.gate(e.cr), Command: isCommandOp(op)}), p.cfg.ConnectTimeout)
	note := &checkNote{}
	jctx = WithCallInfo(jctx, p.callInfoLocked(e.cr, note))
	connect := e.target.Connect
	type joinResult struct {
		s     *session
		ctrl  Controller
		err   error
		again bool
	}
	res := make(chan joinResult, 1)
	waiting := true   // guarded by p.mu: the caller still waits
	finished := false // guarded by p.mu: Connect returned
	// A Connect that ignores its deadline does not keep a session nobody
	// uses any more logged in: once its time is up, a retired session
	// with no call on it is closed (the join then fails).
	overrun := time.AfterFunc(p.cfg.ConnectTimeout+abandonGrace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !finished && s.retired && s.inUse == 0 {
			p.closeLocked(s)
		}
	})
	p.mu.Unlock()
	go func() {
		ctrl, err := connect(jctx)
		cancel()
		overrun.Stop()
		p.mu.Lock()
		defer p.mu.Unlock()
		finished = true
		e.connecting = false
		s.joins--
		defer p.wakeLocked(s.cr.ep)
		defer p.trimLocked(s.cr.ep, nil) // a session retired meanwhile may free a slot
		defer func() {
			if s.retired && s.inUse == 0 && s.joins == 0 {
				p.closeLocked(s) // retired while joined, and nobody uses it
			}
		}()
		switch {
		case err != nil && errors.Is(err, ErrNotShared):
			e.noShare = true
			res <- joinResult{again: true}
			return
		case err != nil:
			// Not a login of its own. A refusal of the credentials counts
			// once against the login (unless the adapter's re-login went
			// through the gate, which counted it): every host without a
			// session of its own then waits out the back-off, and hosts
			// whose calls work keep the session (their calls tell whether
			// it still works). Any other failure (a system not found or
			// failing, a join that ran out of its own time) backs this
			// host alone off.
			if pe := (*Error)(nil); !errors.As(err, &pe) {
				err = &Error{Op: "connect", Class: Classify(err), Err: err}
			}
			switch {
			case note.unknownLocked() && !errors.Is(err, ErrSystemRefused):
				p.ownAuthLocked(e, uncheckedRefusal{err}) // the check proved nothing: this host's alone
			case errors.Is(err, ErrAuth):
				if e.cr.authFailures == authFailures {
					p.failedLocked(e.cr, err)
				}
			case errors.Is(err, ErrSystemRefused):
				p.ownAuthLocked(e, err) // its system refused it: as long as a refusal
			default:
				p.ownLocked(e, err)
			}
			res <- joinResult{err: err}
			return
		case s.retired && s.ctrl != nil && waiting && p.hosts[e.host] == e && !p.closed:
			// Retired while joined (trimmed for another login): still
			// logged in, it serves the call that waited for the join, and
			// is logged out when that call ends.
			p.useLocked(s)
			res <- joinResult{s: s, ctrl: ctrl}
			return
		case s.retired || p.hosts[e.host] != e || p.closed:
			res <- joinResult{again: true} // nothing of its own to close
			return
		}
		e.sess, e.ctrl = s, ctrl
		e.ownFails, e.ownLast = 0, nil
		p.markMissingLocked(e, false)
		s.entries[e] = struct{}{}
		if waiting {
			p.useLocked(s) // the caller's call
		}
		res <- joinResult{s: s, ctrl: ctrl}
	}()
	select {
	case r := <-res:
		p.mu.Lock()
		return r.s, r.ctrl, r.err, r.again
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case r := <-res:
		return r.s, r.ctrl, r.err, r.again
	default:
	}
	waiting = false
	return nil, nil, &Error{Op: op, Class: ClassBusy,
		Message: "gave up waiting for this host to join the BMC's shared session; it goes on, and the next call uses it", Err: ctx.Err()}, false
}

// A login's session is shared as soon as the BMC has accepted the login
// (ConnectInfo.LoggedIn gives a controller on it), not once its Connect
// returns: the Connect then reads its own host's system, which may hang
// for the whole ConnectTimeout (a dead blade), and the hosts of the same
// login join the session meanwhile instead of waiting for that read
// (TestReview35_SameLoginWaitsForDeadBladesJoin). Until its Connect
// returns, such a session (session.early) is on no list of the bound
// (endpoint.live: no eviction or trim closes it, and its slot is counted
// in endpoint.sessions from the login on), and the login counts as one of
// its joins, so that a retire (its joiners forgotten, Close) logs it out
// only once the Connect is over.

// publishEarlyLocked makes s, the session of a login whose Connect still
// runs, its login's shared session (p.mu held), sh being the controller
// the adapter offers on it; nothing if sh shares no session, s opened
// none, or the login shares one already.
func (p *Pool) publishEarlyLocked(s *session, sh Controller) {
	cr := s.cr
	ss, ok := sh.(SessionSharer)
	if !ok || !ss.SharesSession() || s.uncounted || s.ctrl != nil || cr.shared != nil || p.closed {
		return
	}
	ca, ok := sh.(CallAuthenticator)
	s.ctrl, s.shareable, s.authCalls, s.lastUsed = sh, true, ok && ca.AuthenticatesCalls(), p.cfg.Now()
	s.early = true
	s.joins++ // the login's own Connect, until it returns
	cr.shared = s
	p.wakeLocked(cr.ep)
}

// settleEarlyLocked ends the login of e whose session s was shared
// early (p.mu held): its Connect returned ctrl, or err. A Connect that
// publishes its session early returns (or hands over, AfterLoginKeep)
// the controller it offered. It returns the caller's result. note: the
// verdict of the check of a refusal, if any.
func (p *Pool) settleEarlyLocked(s *session, e *entry, ctrl Controller, err error, waiting, overran bool, note *checkNote) loginResult {
	cr, ep := s.cr, s.cr.ep
	s.early = false
	s.joins--
	var kept Controller
	if err != nil {
		kept, err = keptSession(err)
		switch {
		case note.unknownLocked() && !errors.Is(err, ErrSystemRefused):
			p.ownAuthLocked(e, uncheckedRefusal{err})
		case note.countedLocked() && errors.Is(err, ErrAuth):
			// Its check refused the credentials: counted (Pool.check).
		case hostsOwn(err):
			p.succeededLocked(cr)
			p.ownLocked(e, err)
		case p.unansweredOwnLocked(cr, err):
			p.ownLocked(e, err)
		case !overran:
			p.failedLocked(cr, err)
		}
	} else {
		p.succeededLocked(cr)
	}
	defer p.gcLocked(cr)
	own := err == nil && !p.closed && p.hosts[e.host] == e
	switch {
	case s.retired:
		// Retired meanwhile (its joiners forgotten, Close): logged out
		// now, unless a call still uses it.
		if s.ctrl != nil && s.inUse == 0 && s.joins == 0 {
			p.closeLocked(s)
		}
		if err == nil {
			err = &Error{Op: "connect", Class: ClassBusy, Message: "the session was closed during the login"}
		}
		return loginResult{err: err}
	case err != nil && kept == nil:
		// The adapter logged the session out (the service failed after
		// the login): its joiners let go of it, and nothing is left to
		// close.
		s.ctrl = nil
		if !s.uncounted {
			ep.sessions--
		}
		cr.pins--
		p.retireLocked(s)
		return loginResult{err: err}
	case !own && len(s.entries) == 0 && s.joins == 0 && (err == nil || p.closed || len(ep.live)+ep.reserved >= p.cfg.MaxSessions):
		// Nobody joined it, and it is not kept (as keepLocked decides).
		p.retireLocked(s)
		if err == nil {
			err = &Error{Op: "connect", Class: ClassBusy, Message: "the host was forgotten during the login"}
		}
		return loginResult{err: err}
	}
	// Live from now on: in the bound, trimmed back to it keeping s, idle
	// when no call uses it.
	ep.addLive(s)
	p.trimLocked(ep, s)
	if !own {
		if s.inUse == 0 && !s.idle.on {
			p.idle.PushBack(s)
		}
		if err == nil {
			err = &Error{Op: "connect", Class: ClassBusy, Message: "the host was forgotten during the login"}
		}
		return loginResult{err: err}
	}
	s.ctrl = ctrl
	e.sess, e.ctrl = s, ctrl
	e.ownFails, e.ownLast = 0, nil
	p.markMissingLocked(e, false)
	s.entries[e] = struct{}{}
	if waiting {
		p.useLocked(s) // the caller's call
		return loginResult{s: s, ctrl: ctrl}
	}
	if s.inUse == 0 && !s.idle.on {
		p.idle.PushBack(s)
	}
	return loginResult{}
}
