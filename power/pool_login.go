package power

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotShared is returned (wrapped) by a Target.Connect that was offered
// a shared session (ConnectInfo.Shared) it will not use: another endpoint,
// other credentials or other TLS settings than its own. The Pool then logs
// in for the host.
var ErrNotShared = errors.New("power: the offered session is not this host's login")

// SessionSharer is implemented by a Controller whose session can serve
// other hosts behind the same BMC (a Redfish service for a chassis's
// systems). A Pool offers an open one, in ConnectInfo.Shared, to the
// Connect of the other hosts with the same BMC and Target.Login; that
// Connect returns a controller on the same session, without a login, or
// an error matching ErrNotShared. A controller made on a shared session
// holds nothing of its own: the Pool never closes it, and closes the
// session's first controller once no host uses the session.
type SessionSharer interface {
	Controller
	// SharesSession reports whether other hosts may use this session.
	SharesSession() bool
}

// CallAuthenticator is implemented by a Controller whose calls carry the
// credentials themselves (HTTP basic auth: no session). A call of its
// that the BMC answers proves the credentials, as a login does, and ends
// their back-off, an authentication back-off included; its reads are
// held, in turn, at most two a pause, while the BMC leaves the calls with the
// credentials unanswered (heldReadLocked). On other
// controllers (a session outlives a password change on the BMC) an answer
// ends only a back-off after failures that were not the credentials':
// after an authentication failure, only a successful login ends it.
type CallAuthenticator interface {
	Controller
	// AuthenticatesCalls reports whether every call sends the
	// credentials.
	AuthenticatesCalls() bool
}

// LoginGate takes a login a controller makes on its own, inside a call (a
// session expired and re-established), through the Pool's rules: one
// login at a time per BMC, and the back-off of its credentials. It returns
// an error (matching ErrBackoff while backing off) if the login must not
// be made; otherwise done, which the controller must call once with the
// login's outcome. Every failed outcome backs the credentials' logins off
// (a login that ran out of its own time included) but a cancellation
// (context.Canceled): that is the caller's, not the BMC's.
type LoginGate func(ctx context.Context) (done func(err error), err error)

// ConnectInfo is what a Pool tells Target.Connect, in its context.
type ConnectInfo struct {
	// Shared, if not nil, is an open SessionSharer of the same BMC and
	// login: make this host's controller on its session, or fail with
	// ErrNotShared.
	Shared Controller
	// Gate, if not nil, is the gate every later login of the controller
	// must go through.
	Gate LoginGate
	// KeepSession: a login accepted whose host's own system then failed
	// may hand its session over in the error (AfterLoginKeep) rather than
	// log it out: the caller closes it.
	KeepSession bool
	// NoSession, if not nil, is called by a Connect whose login opens no
	// session on the BMC (power/redfish with BasicAuth: every request
	// carries the credentials), as soon as it knows: neither this login
	// nor the later ones of the same host (while its Target stays the
	// same) count against MaxSessions, nor close any session for their
	// place. Other hosts of the same Target.Login are not affected.
	NoSession func()
	// LoggedIn, if not nil, is called by a Connect once the BMC has
	// accepted its login, before it reads the host's system: the BMC's
	// login turn (one login at a time) goes to the next login then, and
	// the system's read (which may hang: a dead blade) is the host's own
	// business. Its session still counts against MaxSessions. shared, if
	// not nil, is a SessionSharer on the new session (the controller the
	// Connect will return or hand over with AfterLoginKeep): the Pool
	// offers it at once to the Connects of the other hosts of the same
	// BMC and login (ConnectInfo.Shared), which need not wait for this
	// host's system read.
	LoggedIn func(shared Controller)
	// Command: the Connect serves a power command (On, Off, Reset: a
	// fence), not a read. An adapter that caps the reads in flight on a
	// session lets this Connect's reads through the cap, as the command's
	// own: a fence never queues behind other hosts' reads (dead blades'
	// reads running to their deadline).
	Command bool
}

// fenceTriedLocked reports whether call op of host e, backing off alone
// after its own failure last, is tried all the same (p.mu held): a power
// command (a fence) after a refusal of the host's system by a BMC that
// answers its credentials (ErrSystemRefused) or whose check proved
// nothing (uncheckedRefusal): it may have been one intermittent 401. One
// such command per back-off window goes (the first; later ones wait for
// the window to end, fenceFreeLocked): a fence costs at most one more
// refused request (and its check) a window, so a remediation retrying
// its fence sends no more than a host's own back-off allows
// (TestReview35_TransientJoin401RefusesFenceForAuthBackoff,
// TestReview35aq_FenceRetriesBypassUncheckedBackoff).
func (p *Pool) fenceTriedLocked(e *entry, op string) bool {
	var u uncheckedRefusal
	if e.fenced || !isCommandOp(op) || !(errors.Is(e.ownLast, ErrSystemRefused) || errors.As(e.ownLast, &u)) {
		return false
	}
	e.fenced = true
	e.fenceGen++
	return true
}

// fenceFreeLocked notes that a call of e goes outside any back-off of its
// own (p.mu held): the next back-off window lets a fence through again
// (fenceTriedLocked).
func fenceFreeLocked(e *entry) { e.fenced = false }

// isCommandOp reports whether op (a call's operation name) is a power
// command's rather than a read's.
func isCommandOp(op string) bool { return op != "state" && op != "task" }

type connectInfoKey struct{}

// WithConnectInfo returns ctx carrying ci.
func WithConnectInfo(ctx context.Context, ci ConnectInfo) context.Context {
	return context.WithValue(ctx, connectInfoKey{}, ci)
}

// ConnectInfoFrom returns the ConnectInfo ctx carries (the zero value if
// none: no shared session, no gate).
func ConnectInfoFrom(ctx context.Context) ConnectInfo {
	ci, _ := ctx.Value(connectInfoKey{}).(ConnectInfo)
	return ci
}

// acquire returns a session and host's controller on it, marked in use,
// logging in or attaching to a shared session as needed. It honours ctx
// while it waits.
// The back-off window's fence pass, if the call takes one, is noted in
// hold (fenceHold), for the caller to give back if nothing is sent; an
// error that no request to the BMC answered or refused gives it back
// here (not tried, its caller gone, no connection), one that the BMC
// answered or refused keeps it: that was the window's fence
// (TestReview35as_FenceConnectRefusedGivesBackPass).
func (p *Pool) acquire(ctx context.Context, op, host string, t Target, hold *fenceHold, cache **entry) (*session, Controller, error) {
	p.mu.Lock()
	s, ctrl, err := p.acquireLocked(ctx, op, host, t, nil, nil, hold, cache)
	if err != nil && !reachedBMC(err) {
		p.mu.Lock()
		p.giveBackFenceLocked(hold)
		p.mu.Unlock()
	}
	return s, ctrl, err
}

// reachedBMC reports whether err, a failed login's or call's, says that a
// request of it reached the BMC and was answered or refused: ErrAuth,
// ErrSystemRefused, ErrCheckCut (a refusal whose check was cut short) or
// any answer with a status; not ErrBackoff (not tried: it carries the
// last refusal it waits out, which this call did not send).
func reachedBMC(err error) bool {
	if errors.Is(err, ErrBackoff) {
		return false
	}
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrSystemRefused) || errors.Is(err, ErrCheckCut) || answered(err)
}

// acquireLocked is acquire (p.mu held on entry, released); held: the
// entry the call started with, reserved: the BMC whose slot an eviction
// freed for it, if any (carryOn).
func (p *Pool) acquireLocked(ctx context.Context, op, host string, t Target, held *entry, reserved *endpoint, hold *fenceHold, cache **entry) (*session, Controller, error) {
	carried := reserved != nil // a login carried on without its caller
	fencePass := false         // this call goes through its host's back-off as a fence
	fenceTried := func(e *entry) bool {
		// Taken once per call, whatever it waits for after; never by a
		// caller already gone, which would send nothing
		// (TestReview35ar_CancelledFenceTakesWindowsPass).
		if !fencePass && ctx.Err() == nil {
			fencePass = p.fenceTriedLocked(e, op)
			if fencePass {
				hold.take(e)
			}
		}
		return fencePass
	}
	var joinBy time.Time // when a wait for a join of a kept session ends
	unreserve := func() {
		if reserved != nil {
			reserved.reserved--
			p.wakeLocked(reserved)
			reserved = nil
		}
	}
	fail := func(err error) (*session, Controller, error) {
		unreserve()
		p.mu.Unlock()
		return nil, nil, err
	}
	// giveUp: the caller's context ended while it waited. A working
	// session closed for this call's login is not closed for nothing: the
	// login goes on without the caller, in the slot held for it.
	giveUp := func(err error) (*session, Controller, error) {
		if reserved != nil && !carried {
			p.carryOnLocked(op, host, t, held, reserved)
			reserved = nil
			err = &Error{Op: op, Class: ClassBusy, Err: err,
				Message: "gave up waiting for the login a session of this BMC was closed for; it goes on, and the next call uses it"}
		}
		return fail(err)
	}
	for {
		if p.closed {
			return fail(ErrPoolClosed)
		}
		if carried && reserved == nil {
			// The slot is gone (the host moved, or joined a shared
			// session that went away): no login for a caller that left.
			return fail(&Error{Op: op, Class: ClassBusy, Message: "the login an eviction was for is no longer needed"})
		}
		if held != nil && held.gone && p.hosts[host] == nil {
			// Forgotten while this call waited: a waiting call must not
			// bring the host back (nobody would forget it again).
			return fail(&Error{Op: op, Class: ClassBusy, Message: "the host was forgotten during the call"})
		}
		if carried && p.hosts[host] != held {
			// Replaced (new credentials, another BMC) or forgotten since
			// its caller left: a login carried on with the caller's old
			// Target would log out the host's current session and log in
			// with credentials it no longer uses.
			return fail(&Error{Op: op, Class: ClassBusy, Message: "the host's target changed: the login an eviction was for is no longer needed"})
		}
		e := p.cachedEntryLocked(host, t, cache)
		held = e
		cr, ep := e.cr, e.cr.ep
		if reserved != nil && reserved != ep {
			unreserve() // the host moved to another BMC meanwhile
		}
		if e.ctrl != nil {
			// An open session: calls go through, whatever any login's
			// back-off; but a read on credentials the BMC no longer
			// answers is held (heldReadLocked).
			s, ctrl := e.sess, e.ctrl // read under the lock: Forget may clear them
			if err := p.heldReadLocked(op, e, s); err != nil {
				return fail(err)
			}
			if now := p.cfg.Now(); !ownRefusal(e.ownLast) || !now.Before(e.ownUntil) {
				fenceFreeLocked(e)
			} else if !fenceTried(e) {
				// The BMC refused this host's own requests (not its
				// credentials, which it answers): it backs off alone,
				// session or not (ownAuthLocked).
				return fail(&Error{Op: op, Class: ClassFailed,
					Message: fmt.Sprintf("not tried: the BMC refused this host's own requests %d time(s) in a row while it answers the same credentials, next try in %s",
						e.ownFails, e.ownUntil.Sub(now).Round(time.Millisecond)),
					Err: errors.Join(ErrBackoff, e.ownLast)})
			}
			p.useLocked(s)
			unreserve()
			p.mu.Unlock()
			return s, ctrl, nil
		}
		now := p.cfg.Now()
		if e.connecting {
			// A login (or an attach) for this host runs: wait for it,
			// unless it ran past its deadline and logins back off.
			if err := p.backoffErrLocked(op, cr, now); err != nil {
				return fail(err)
			}
			if err := p.waitLocked(ctx, ep, op, "waiting for the login of this host"); err != nil {
				return giveUp(err)
			}
			continue
		}
		if e.ownLast == nil || !now.Before(e.ownUntil) {
			fenceFreeLocked(e)
		} else if !fenceTried(e) {
			return fail(&Error{Op: op, Class: ClassFailed,
				Message: fmt.Sprintf("not tried: this host's own connection to the BMC failed %d time(s) in a row, next try in %s",
					e.ownFails, e.ownUntil.Sub(now).Round(time.Millisecond)),
				Err: errors.Join(ErrBackoff, e.ownLast)})
		}
		if s := cr.shared; s != nil && !e.noShare && s.ctrl != nil {
			// Joining is not a call on an open session of this host's:
			// it waits out the login's back-off (a refused join counts
			// against the login, so that joiners of a password rotated
			// on the BMC do not each retry it at their callers' rate).
			if err := p.backoffErrLocked(op, cr, now); err != nil {
				return fail(err)
			}
			unreserve() // a join takes no slot
			s2, ctrl, err, again := p.attach(ctx, op, e, s)
			if again {
				continue
			}
			p.mu.Unlock()
			return s2, ctrl, err
		}
		if err := p.backoffErrLocked(op, cr, now); err != nil {
			return fail(err)
		}
		if ep.logging && !e.sessionless { // a login that opens no session takes no turn
			if err := p.waitLocked(ctx, ep, op, "waiting for another login to this BMC"); err != nil {
				return giveUp(err)
			}
			continue
		}
		if cr.connecting > 0 {
			// A login with these credentials was accepted and reads its
			// host's system (the BMC's login turn handed on,
			// ConnectInfo.LoggedIn) without offering its session
			// early (pool_join.go: then this host joins it above): its
			// session is shared once it returns, so wait for it rather
			// than log in again
			// (TestReview35_SlowSystemLookupSplitsSharedLogin).
			if err := p.waitLocked(ctx, ep, op, "waiting for another login with these credentials to this BMC"); err != nil {
				return giveUp(err)
			}
			continue
		}
		// Slots freed by evictions are held for the logins that evicted
		// (endpoint.reserved): no other login takes them.
		others := ep.reserved
		if reserved == ep {
			others--
		}
		// Credentials that never logged in here are tried before any live
		// session makes way for them (one such login over the bound at a
		// time: logins are one at a time per BMC): a wrong password never
		// closes another host's working session. Once the login
		// succeeds, the bound is restored (trimLocked), the slots held
		// for evicting logins counted.
		// So is a host whose own last tries failed after the BMC
		// accepted its login (entry.missing: its system missing or
		// failing), at its own back-off: it never closes a session that
		// serves hosts, and a repaired system is served again whatever
		// its neighbours' use of the bound.
		// Such retries over the bound are at most one per LoginInterval
		// per BMC (endpoint.lastProbe), whatever the number of such
		// hosts.
		// The turn goes to the host that had it longest ago among those
		// asking (pool_turn.go), not to whoever calls first.
		missingProbe := e.missing && !e.sessionless && p.turnLocked(e, now)
		probe := (!cr.proven || missingProbe) && ep.sessions <= p.cfg.MaxSessions
		// A session retired while a host joins it (endpoint.outgoing: a
		// kept session a login waited for, past joinWait) stays logged in
		// until the join ends, never cut short: one such is not counted,
		// and a login goes one over the bound meanwhile.
		counted := ep.sessions - min(ep.outgoing, 1)
		if counted+others >= p.cfg.MaxSessions && !probe && !e.sessionless {
			p.urgentCloseLocked(ep)
			if reserved == ep {
				// This call's eviction freed a slot, held for it: wait
				// for it (the victim's logout, or a login over the bound
				// trimming), not for another eviction.
				if err := p.waitLocked(ctx, ep, op, "waiting for a session closed for this login to be logged out"); err != nil {
					return giveUp(err)
				}
				continue
			}
			if e.missing {
				// Another login runs over the bound: this host, whose
				// own tries failed, waits for it, and closes nothing.
				if ep.sessions > len(ep.live) {
					if err := p.waitLocked(ctx, ep, op, "waiting for a free session on this BMC"); err != nil {
						return giveUp(err)
					}
					continue
				}
				return fail(&Error{Op: op, Class: ClassBusy, Err: e.ownLast, Message: fmt.Sprintf(
					"not tried: the BMC's %d sessions serve hosts that work, and this host's system failed on its last tries (see the cause); it tries again over the bound, closing no session, at its own back-off (one such try per BMC per login interval, in turn among such hosts)",
					p.cfg.MaxSessions)})
			}
			if !cr.proven {
				// Credentials not proven here (probe is false: the BMC
				// is over the bound, a probe or a logout under way)
				// close no session: they wait for the BMC to be back
				// at the bound, and then log in over it.
				if err := p.waitLocked(ctx, ep, op, "waiting for a session of this BMC being opened or logged out"); err != nil {
					return giveUp(err)
				}
				continue
			}
			var by *entry // a power command's host
			if isCommandOp(op) {
				by = e
			}
			evicted, wait, joined := p.evictLocked(ep, now, by)
			if joined != nil && !evicted && !isCommandOp(op) {
				// A host joins a kept session (one that serves no
				// host): a read waits for the join (its caller's time
				// at most) and never takes the BMC over the bound for
				// it (TestReview35_OverBoundBesideJoinNotInGuarantees).
				if err := p.waitLocked(ctx, ep, op, "waiting for a host's join of a kept session"); err != nil {
					return giveUp(err)
				}
				continue
			}
			if joined != nil && !evicted {
				// A host joins a kept session (one that serves no
				// host): a power command waits for the join a short
				// while only, then
				// retire that session: it stays logged in for the
				// join, which is not cut short (it is bounded by its
				// own ConnectTimeout alone), and is logged out once the
				// join (and the call it serves) ends; meanwhile this
				// login goes one over the bound (endpoint.outgoing).
				if joinBy.IsZero() { // the first wait sets the limit: wake-ups do not extend it
					joinBy = time.Now().Add(p.joinWait(ctx))
				}
				wctx, cancel := context.WithDeadline(ctx, joinBy)
				err := p.waitLocked(wctx, ep, op, "waiting for a host's join of a kept session")
				cancel()
				if err != nil && ctx.Err() != nil {
					return giveUp(err)
				}
				if err != nil && !joined.retired && len(joined.entries) == 0 {
					p.retireLocked(joined) // the last join to end logs it out
				}
				continue
			}
			if evicted {
				ep.reserved++
				reserved = ep
			}
			// A slot held for another login (its session may be one this
			// login joins) is worth waiting for too.
			if !evicted && !wait && others == 0 {
				return fail(&Error{Op: op, Class: ClassBusy, Message: fmt.Sprintf(
					"the BMC's %d sessions serve other logins and one was closed for a login less than %s ago: try again later",
					p.cfg.MaxSessions, p.cfg.LoginInterval)})
			}
			if err := p.waitLocked(ctx, ep, op, "waiting for a free session on this BMC"); err != nil {
				return giveUp(err)
			}
			continue
		}
		if e.missing && !e.sessionless {
			if !missingProbe {
				// A free slot, but a retry of a failing system ran less
				// than LoginInterval ago: one such login per interval.
				return fail(&Error{Op: op, Class: ClassBusy, Err: e.ownLast, Message: "not tried: this host's system failed on its last tries (see the cause), and another such host of this BMC tried less than a login interval ago or had its turn longer ago (one such try per BMC per login interval, in turn)"})
			}
			p.tookRetryLocked(e, now) // a retry of a host whose system failed
		}
		unreserve()                // the login takes the slot (ep.sessions)
		return p.login(ctx, op, e) // unlocks
	}
}

// carryOnLocked goes on with the login a slot of ep was freed (and is
// held) for, after its caller gave up waiting (p.mu held): bounded by
// ConnectTimeout, its session serves the next call.
func (p *Pool) carryOnLocked(op, host string, t Target, held *entry, ep *endpoint) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
		defer cancel()
		p.mu.Lock()
		var hold fenceHold // a login only: no power command is sent
		s, _, err := p.acquireLocked(ctx, op, host, t, held, ep, &hold, nil)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.giveBackFenceLocked(&hold)
		if err != nil {
			return
		}
		p.doneLocked(s, false) // no call: the session waits, idle, for the next
	}()
}

// loginResult is a login's outcome for the caller that started it.
type loginResult struct {
	s    *session
	ctrl Controller
	err  error
}

// login runs e's Target.Connect (p.mu held on entry, released). The login
// is bounded by ConnectTimeout only: a caller that gives up waiting gets a
// busy error at once, and the login goes on, its outcome counted and its
// session kept for the next call (the caller's cancellation is not the
// BMC's failure).
func (p *Pool) login(ctx context.Context, op string, e *entry) (*session, Controller, error) {
	cr, ep := e.cr, e.cr.ep
	// turn, guarded by p.mu: this login holds ep.logging, the BMC's one
	// login at a time; a login that opens no session (entry.sessionless,
	// ConnectInfo.NoSession) takes none, or hands it on when it says so.
	turn := !e.sessionless
	if turn {
		ep.logging = true
	}
	// endTurn hands the BMC's login turn on (p.mu held), once.
	endTurn := func() {
		if turn {
			turn = false
			ep.logging = false
			p.wakeLocked(ep)
		}
	}
	cr.pins++ // until the session is logged out, or the login failed
	cr.connecting++
	e.connecting = true
	p.seq++
	s := &session{cr: cr, entries: map[*entry]struct{}{}, seq: p.seq, uncounted: e.sessionless}
	if !s.uncounted {
		ep.sessions++
	}
	res := make(chan loginResult, 1)
	waiting := true                   // guarded by p.mu: the caller still waits
	finished, overran := false, false // guarded by p.mu
	// The adapter says its login opens no session on the BMC: it gives
	// its slot back, and the login's later ones take none.
	noSession := func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		e.sessionless = true
		endTurn() // no session opened: the BMC's next login may go
		if !finished && !s.uncounted {
			s.uncounted = true
			ep.sessions--
			p.wakeLocked(ep)
		}
	}
	// The BMC accepted the login: the next login may go, beside this
	// one's read of its system, and the hosts of the same login join its
	// session meanwhile (pool_join.go).
	loggedIn := func(shared Controller) {
		p.mu.Lock()
		defer p.mu.Unlock()
		endTurn()
		if shared != nil && !finished {
			p.publishEarlyLocked(s, shared)
		}
	}
	cctx, cancel := context.WithTimeout(WithConnectInfo(context.WithoutCancel(ctx),
		ConnectInfo{Gate: p.gate(cr), KeepSession: true, NoSession: noSession, LoggedIn: loggedIn, Command: isCommandOp(op)}), p.cfg.ConnectTimeout)
	// A refusal is checked against the credentials only if it may be one
	// host's own that neighbours would pay for, and not on a retry during
	// the back-off of their confirmed refusal (callInfoLocked).
	note := &checkNote{}
	cctx = WithCallInfo(cctx, p.callInfoLocked(cr, note))
	connect := e.target.Connect
	// A Connect that ignores its deadline is the BMC's (or the adapter's)
	// failure: later logins back off while it runs on.
	overrun := time.AfterFunc(p.cfg.ConnectTimeout+abandonGrace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !finished {
			overran = true
			p.failedLocked(cr, &Error{Op: "connect", Class: ClassBusy, Message: "the BMC did not complete the login in time", Err: context.DeadlineExceeded})
			p.wakeLocked(ep)
		}
	})
	p.mu.Unlock()
	go func() {
		ctrl, err := connect(cctx)
		cancel()
		overrun.Stop()
		if err != nil {
			if pe := (*Error)(nil); !errors.As(err, &pe) {
				err = &Error{Op: "connect", Class: Classify(err), Err: err}
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		finished = true
		endTurn()
		cr.connecting--
		e.connecting = false
		defer p.wakeLocked(ep)
		if s.early {
			res <- p.settleEarlyLocked(s, e, ctrl, err, waiting, overran, note)
			return
		}
		if err != nil {
			var kept Controller
			kept, err = keptSession(err)
			switch {
			case note.unknownLocked() && !errors.Is(err, ErrSystemRefused):
				// Refused, and the check proved nothing: this host backs
				// off alone; the credentials are neither backed off nor
				// proven.
				p.ownAuthLocked(e, uncheckedRefusal{err})
			case note.countedLocked() && errors.Is(err, ErrAuth):
				// Its check refused the credentials: counted (Pool.check).
			case hostsOwn(err):
				// The login worked; the host's system is not there, or
				// failed: the host's own, no back-off for its neighbours
				// (this host backs off alone).
				p.succeededLocked(cr)
				if errors.Is(err, ErrSystemRefused) {
					p.ownAuthLocked(e, err) // its system refused it: as long as a refusal
				} else {
					p.ownLocked(e, err)
				}
			case p.unansweredOwnLocked(cr, err):
				p.ownLocked(e, err)
			case !overran:
				p.failedLocked(cr, err)
			}
			if kept == nil {
				if !s.uncounted {
					ep.sessions--
				}
				cr.pins--
			} else {
				p.keepLocked(s, kept, hostsOwn(err) && !p.closed && p.hosts[e.host] == e)
			}
			p.gcLocked(cr)
			res <- loginResult{err: err}
			return
		}
		p.succeededLocked(cr)
		s.ctrl, s.lastUsed = ctrl, p.cfg.Now()
		ss, ok := ctrl.(SessionSharer)
		s.shareable = ok && ss.SharesSession()
		ca, ok := ctrl.(CallAuthenticator)
		s.authCalls = ok && ca.AuthenticatesCalls()
		if !s.uncounted { // a session on the BMC: in the bound
			ep.addLive(s)
			p.trimLocked(ep, s)
		}
		if s.shareable && cr.shared == nil {
			cr.shared = s
		}
		if p.closed || p.hosts[e.host] != e {
			p.retireLocked(s) // forgotten meanwhile: nobody uses it
			res <- loginResult{err: &Error{Op: op, Class: ClassBusy, Message: "the host was forgotten during the login"}}
			return
		}
		e.sess, e.ctrl = s, ctrl
		e.ownFails, e.ownLast = 0, nil
		p.markMissingLocked(e, false)
		s.entries[e] = struct{}{}
		if waiting {
			p.useLocked(s) // the caller's call (s is on no idle list)
			res <- loginResult{s: s, ctrl: ctrl}
			return
		}
		p.idle.PushBack(s)
	}()
	select {
	case r := <-res:
		return r.s, r.ctrl, r.err
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case r := <-res:
		p.mu.Unlock()
		return r.s, r.ctrl, r.err
	default:
	}
	waiting = false
	p.mu.Unlock()
	return nil, nil, &Error{Op: op, Class: ClassBusy,
		Message: "gave up waiting for the login to the BMC; it goes on, and the next call uses it", Err: ctx.Err()}
}

// keepLocked takes over ctrl, the session of login s whose host's own
// system failed (p.mu held; s holds its slot and pin): if ok and it can
// be shared and the login shares no session yet, it becomes the login's
// shared session, idle, with no host of its own, that the host's
// neighbours (and the host, at its next try) join without logging in: a
// service whose systems fail one by one, or all at once while it serves
// its collection, sees one login per idle session, not one per host and
// try. Closed once idle (IdleTimeout), as any session. Otherwise, or if
// keeping it would take the endpoint over MaxSessions (a session that
// serves no host never closes one that does, nor spends the endpoint's
// eviction), it is logged out.
func (p *Pool) keepLocked(s *session, ctrl Controller, ok bool) {
	cr, ep := s.cr, s.cr.ep
	s.ctrl, s.lastUsed = ctrl, p.cfg.Now()
	ss, isSharer := ctrl.(SessionSharer)
	ca, isAuth := ctrl.(CallAuthenticator)
	s.shareable, s.authCalls = isSharer && ss.SharesSession(), isAuth && ca.AuthenticatesCalls()
	if !ok || !s.shareable || s.uncounted || cr.shared != nil || len(ep.live)+ep.reserved >= p.cfg.MaxSessions {
		s.retired = true
		p.closeLocked(s) // the closer frees its slot and pin
		return
	}
	ep.addLive(s)
	cr.shared = s
	p.idle.PushBack(s)
}

// ownLocked records a Connect failure of e that is its own (p.mu held):
// it backs e alone off, Backoff doubling up to MaxBackoff. The caller's
// cancellation, a refusal without a try (ErrBackoff) and a refusal of the
// credentials (the login's, not the host's) are not counted.
func (p *Pool) ownLocked(e *entry, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrBackoff) || errors.Is(err, ErrAuth) {
		return
	}
	d, limit := p.cfg.Backoff, p.cfg.MaxBackoff
	e.ownFails++
	e.ownLast = err
	p.markMissingLocked(e, hostsOwn(err) && e.ownFails >= missingAfter)
	for i := 1; i < e.ownFails && d < limit; i++ {
		d *= 2
	}
	e.ownUntil = p.cfg.Now().Add(min(d, limit))
}

// ownAuthLocked backs host entry e off alone after a refusal that is its
// own, not its credentials' (ErrSystemRefused; ErrAuth after a re-login
// inside the call succeeded) (p.mu held): AuthBackoff, doubling up to
// MaxAuthBackoff, as a refused login's, so that the host sends the
// refused request no more often than a wrong password would.
func (p *Pool) ownAuthLocked(e *entry, err error) {
	d, limit := p.cfg.AuthBackoff, p.cfg.MaxAuthBackoff
	e.ownFails++
	e.ownLast = err
	for i := 1; i < e.ownFails && d < limit; i++ {
		d *= 2
	}
	e.ownUntil = p.cfg.Now().Add(min(d, limit))
}

// missingAfter: a host whose tries failed after the BMC accepted the
// login this many times in a row counts as missing (its system is
// missing or failing, not just being renumbered or reseated): one retry
// after a first such failure may still close a working session; later
// ones only log in over the bound, closing none.
const missingAfter = 2

// markMissingLocked records whether e's last tries failed after the BMC
// accepted its login (p.mu held). A host no longer in the Pool is not
// marked.
func (p *Pool) markMissingLocked(e *entry, missing bool) {
	e.missing = missing && !e.gone
	if !e.missing {
		p.leaveTurnsLocked(e)
	}
}

// gate returns the LoginGate of login cr.
func (p *Pool) gate(cr *creds) LoginGate {
	return func(ctx context.Context) (func(error), error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		ep := cr.ep
		for {
			if p.closed {
				return nil, ErrPoolClosed
			}
			if err := p.backoffErrLocked("login", cr, p.cfg.Now()); err != nil {
				return nil, err
			}
			if !ep.logging {
				break
			}
			if err := p.waitLocked(ctx, ep, "login", "waiting for another login to this BMC"); err != nil {
				return nil, err
			}
		}
		ep.logging = true
		cr.pins++
		var once sync.Once
		return func(err error) {
			once.Do(func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				ep.logging = false
				cr.pins--
				switch {
				case err == nil:
					p.succeededLocked(cr)
				case errors.Is(err, context.Canceled):
					// The caller's cancellation: not the BMC's failure.
					// A login that ran out of time (its own deadline,
					// detached from the caller's, as power/redfish's
					// re-login) is the BMC's, and backs off.
				default:
					p.failedLocked(cr, err)
				}
				p.gcLocked(cr)
				p.wakeLocked(ep)
			})
		}, nil
	}
}

// backoffErrLocked returns the error of a login not tried (p.mu held), or
// nil.
func (p *Pool) backoffErrLocked(op string, cr *creds, now time.Time) error {
	if cr.last == nil || !now.Before(cr.until) {
		return nil
	}
	class := ClassBusy
	if cr.auth {
		class = ClassFailed
	}
	return &Error{Op: op, Class: class,
		Message: fmt.Sprintf("login not tried: logins to the BMC with these credentials failed %d time(s) in a row, next try in %s",
			cr.failures+cr.authFailures, cr.until.Sub(now).Round(time.Millisecond)),
		Err: errors.Join(ErrBackoff, cr.last)}
}

// failedLocked records a failed login of cr (p.mu held). Authentication
// failures and other failures each double their own pause; a failure
// never shortens a pause already running.
func (p *Pool) failedLocked(cr *creds, err error) {
	// A Connect that sent the credentials and got no answer at all
	// (ErrUnanswered, and no answer with them lately) may be a refusal
	// the BMC holds back: it backs off as one.
	auth := errors.Is(err, ErrAuth) || errors.Is(err, ErrUnanswered)
	cr.loginsFailed++
	var d, limit time.Duration
	var n int
	if auth {
		// The BMC refused these credentials: they are no longer proven
		// (a password rotated since they last logged in), so their next
		// login is tried before any working session makes way for it.
		cr.proven = false
		cr.authFailures += 1 + cr.checksRefused // each refused request the BMC saw
		cr.checksRefused = 0
		n, d, limit = cr.authFailures, p.cfg.AuthBackoff, p.cfg.MaxAuthBackoff
	} else {
		cr.failures++
		n, d, limit = cr.failures, p.cfg.Backoff, p.cfg.MaxBackoff
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	cr.auth, cr.last = auth, err
	if until := p.cfg.Now().Add(d); until.After(cr.until) {
		cr.until = until
	}
	if p.cfg.Logger != nil {
		p.cfg.Logger.Warn("BMC logins backing off", "bmc", cr.ep.name, "failures", cr.failures+cr.authFailures, "for", d, "error", err)
	}
}

// unansweredOwnLocked reports whether err, a Connect failure of login
// cr, is one in which the BMC answered no request sent with the
// credentials (ErrUnanswered) while a request with them was answered
// within the last LoginInterval (p.mu held): the credentials work, so the
// failure is the host's own (a dead system behind a service that hangs
// with it), not the login's.
func (p *Pool) unansweredOwnLocked(cr *creds, err error) bool {
	return errors.Is(err, ErrUnanswered) && !errors.Is(err, ErrAuth) &&
		!cr.answeredAt.IsZero() && p.cfg.Now().Sub(cr.answeredAt) < p.cfg.LoginInterval
}

// succeededLocked records a successful login of cr (p.mu held): the
// credentials are proven and their back-off ends.
func (p *Pool) succeededLocked(cr *creds) {
	cr.loginsOK++
	cr.answeredAt = p.cfg.Now()
	cr.heldUntil, cr.roundUntil, cr.heldProbes = time.Time{}, time.Time{}, 0
	clearTurnsLocked(&cr.held)
	cr.failures, cr.authFailures, cr.auth, cr.last, cr.until = 0, 0, false, nil, time.Time{}
	cr.checksRefused = 0
	cr.confirmed = false
	cr.proven = true
}

// answeredLocked records an answer of the BMC on a session of cr (p.mu
// held): the BMC is there, which ends a back-off after other failures;
// it says nothing of the credentials (a session outlives a password
// change), so a back-off after an authentication failure runs on: only
// a successful login ends it.
func (p *Pool) answeredLocked(cr *creds) {
	cr.answeredAt = p.cfg.Now()
	cr.heldUntil, cr.roundUntil, cr.heldProbes = time.Time{}, time.Time{}, 0
	clearTurnsLocked(&cr.held)
	if cr.authFailures > 0 { // refused since the last successful login
		return
	}
	cr.failures, cr.last, cr.until = 0, nil, time.Time{}
}
