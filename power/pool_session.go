package power

import (
	"container/heap"
	"context"
	"time"
)

// endpointLocked returns BMC name's state, made on first use (p.mu held).
func (p *Pool) endpointLocked(name string) *endpoint {
	ep, ok := p.eps[name]
	if !ok {
		ep = &endpoint{name: name, live: map[*session]struct{}{}, creds: map[string]*creds{}}
		p.eps[name] = ep
		p.epsHigh = max(p.epsHigh, len(p.eps))
	}
	return ep
}

// entryLocked returns host's entry for t (p.mu held): the one kept, or a
// new one if there is none or t's configuration differs from its.
func (p *Pool) entryLocked(host string, t Target) *entry {
	e := p.hosts[host]
	if e != nil && e.target.BMC == t.BMC && e.target.Config == t.Config && e.target.Login == t.Login {
		e.target.Connect = t.Connect
		return e
	}
	ep := p.endpointLocked(t.BMC)
	key := t.loginKey()
	cr, ok := ep.creds[key]
	if !ok {
		cr = &creds{key: key, ep: ep}
		ep.creds[key] = cr
	}
	cr.refs++ // before the old entry lets go: the same login survives
	p.unparkLocked(cr)
	if e != nil {
		p.detachLocked(e)
	}
	e = &entry{host: host, target: t, cr: cr}
	e.retry.e, e.held.e = e, e
	p.hosts[host] = e
	p.hostsHigh = max(p.hostsHigh, len(p.hosts))
	return e
}

// cachedEntryLocked is entryLocked through *cache, the entry the
// Controller of host and t found last (p.mu held; cache may be nil): it
// is taken again without a lookup while it is the host's (an entry that
// left p.hosts is gone, for good, and its Target stays t's), else
// entryLocked's is, and cached.
func (p *Pool) cachedEntryLocked(host string, t Target, cache **entry) *entry {
	if cache == nil {
		return p.entryLocked(host, t)
	}
	if e := *cache; e != nil && !e.gone {
		e.target.Connect = t.Connect
		return e
	}
	e := p.entryLocked(host, t)
	*cache = e
	return e
}

// detachLocked lets entry e (no longer in p.hosts) go of its session and
// login, and drops what nobody uses any more (p.mu held).
func (p *Pool) detachLocked(e *entry) {
	e.gone = true
	p.markMissingLocked(e, false)
	leaveTurnLocked(&e.cr.held, &e.held)
	if s := e.sess; s != nil {
		delete(s.entries, e)
		if len(s.entries) == 0 && !s.early {
			// (A session shared early is its login's until that login's
			// Connect returns: settleEarlyLocked decides then whether
			// anybody keeps it; TestReview35v_ForgottenJoinerDiscardsEarlyLogin.)
			p.retireLocked(s)
		}
	}
	e.sess, e.ctrl = nil, nil
	cr := e.cr
	cr.refs--
	p.gcLocked(cr)
	p.wakeLocked(cr.ep)
}

// gcLocked drops login cr once no host uses it, no session of it is live
// and its back-off is over (until then the janitor looks at it), and its
// BMC's state once it has no login, no session and no login running (p.mu
// held).
func (p *Pool) gcLocked(cr *creds) {
	ep := cr.ep
	switch {
	case ep.creds[cr.key] != cr:
		p.unparkLocked(cr)
	case cr.refs > 0 || cr.pins > 0 || cr.shared != nil || cr.checking != nil:
		p.unparkLocked(cr) // in use again, or its check runs (Pool.check)
	case cr.last != nil && p.cfg.Now().Before(cr.until):
		if cr.parkedAt == 0 {
			heap.Push(&p.parked, cr)
		} else {
			heap.Fix(&p.parked, cr.parkedAt-1)
		}
	default:
		p.unparkLocked(cr)
		delete(ep.creds, cr.key)
	}
	if len(ep.creds) == 0 && ep.sessions == 0 && !ep.logging && p.eps[ep.name] == ep {
		delete(p.eps, ep.name)
		p.eps, p.epsHigh = shrink(p.eps, p.epsHigh)
	}
}

// useLocked marks one more call on s (p.mu held): a call Close waits for
// until it ends (doneLocked) or is given up on (abandonLocked).
func (p *Pool) useLocked(s *session) {
	p.calls++
	s.inUse++
	if s.idle.on {
		p.idle.Remove(s)
	}
}

// doneLocked ends a use of s (p.mu held): a retired session is closed once
// no call uses it, a live one waits on the idle list. abandoned: the call
// was given up on (abandonLocked); Close does not wait for its logout.
func (p *Pool) doneLocked(s *session, abandoned bool) {
	if !abandoned {
		p.calls--
		p.drainedLocked()
	}
	s.inUse--
	s.lastUsed = p.cfg.Now()
	if s.inUse == 0 {
		if s.retired {
			if s.joins == 0 || p.closed { // Close does not wait for a join
				p.closeCountLocked(s, !abandoned)
			} else {
				p.joinedRetired[s] = struct{}{} // logged out when its joins end, or on Close
			}
		} else if !s.idle.on {
			p.idle.PushBack(s)
			p.trimLocked(s.cr.ep, nil)
		}
	}
	p.wakeLocked(s.cr.ep)
}

// retireLocked takes live session s out of use (p.mu held): its hosts
// let go of it, and it is closed now, or once no call uses it. It counts
// against its BMC's sessions until the BMC has logged it out.
func (p *Pool) retireLocked(s *session) {
	if s.retired {
		return
	}
	s.retired = true
	ep, cr := s.cr.ep, s.cr
	if s.joins > 0 && !s.outgoing {
		s.outgoing = true
		ep.outgoing++
	}
	ep.dropLive(s)
	if cr.shared == s {
		cr.shared = nil
	}
	if s.idle.on {
		p.idle.Remove(s)
	}
	for e := range s.entries {
		e.sess, e.ctrl = nil, nil
	}
	s.entries = nil
	switch {
	case s.inUse == 0 && (s.joins == 0 || p.closed): // Close does not wait for a join
		p.closeLocked(s)
	case s.inUse == 0:
		p.joinedRetired[s] = struct{}{} // logged out when its joins end, or on Close
	}
	p.gcLocked(cr)
	p.wakeLocked(ep)
}

// abandonLocked gives up on a call on s past its deadline (p.mu held):
// its session is retired, and Close no longer waits for the call.
func (p *Pool) abandonLocked(s *session) {
	p.calls--
	p.drainedLocked()
	p.retireLocked(s)
}

// closeLocked closes s's controller in the background (p.mu held); the
// BMC's session count drops once it returns. Controllers made on a shared
// session hold nothing of their own and are not closed. Each BMC's closes
// run one at a time, in order, on their own queue; at most maxClosers
// BMCs' queues run at once (a fleet forgotten at once is not a storm of
// logouts, nor of goroutines), and a login waiting for one of its BMC's
// sessions to be closed starts that BMC's queue at once
// (urgentCloseLocked): dead BMCs' hanging logouts never hold up another
// BMC's.
func (p *Pool) closeLocked(s *session) { p.closeCountLocked(s, false) }

// closeCountLocked is closeLocked; count: Close waits for this logout
// even if it already waits (the session of a call it waits for).
func (p *Pool) closeCountLocked(s *session, count bool) {
	delete(p.joinedRetired, s)
	if s.outgoing {
		s.outgoing = false
		s.cr.ep.outgoing--
	}
	c := s.ctrl
	s.ctrl = nil
	if c == nil {
		return
	}
	if p.cfg.Logger != nil {
		p.cfg.Logger.Info("closing BMC session", "bmc", s.cr.ep.name)
	}
	counted := !p.waiting || count
	if counted {
		p.counted++
	}
	ep := s.cr.ep
	ep.closeQ = append(ep.closeQ, closeJob{s: s, c: c, counted: counted})
	if ep.closing || ep.ready {
		return
	}
	if p.closers < maxClosers || p.closed && p.closers < maxClosingClosers {
		p.startCloserLocked(ep)
		return
	}
	ep.ready = true
	p.readyQ = append(p.readyQ, ep)
}

// urgentCloseLocked starts ep's queued closes now, beyond maxClosers, if
// none runs (p.mu held): a login waits for them. At most one goroutine
// per BMC with a login waiting is added.
func (p *Pool) urgentCloseLocked(ep *endpoint) {
	if len(ep.closeQ) > 0 && !ep.closing {
		p.startCloserLocked(ep)
	}
}

// startCloserLocked starts a goroutine closing ep's queue (p.mu held).
// ep must not be closing already.
func (p *Pool) startCloserLocked(ep *endpoint) {
	ep.closing, ep.ready = true, false
	p.closers++
	go p.closer(ep)
}

// maxClosers bounds the BMCs whose closes (logouts) run at once, but for
// the BMCs a login waits on; maxClosingClosers, once Close was called
// (Close waits closeTimeout at most for them all).
const (
	maxClosers        = 64
	maxClosingClosers = 1024
)

// closeJob is a session to close.
type closeJob struct {
	s       *session
	c       Controller
	counted bool // in p.counted
}

// closer closes ep's queued sessions, then those of the BMCs waiting for
// a closer, until none is left.
func (p *Pool) closer(ep *endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ep != nil {
		for len(ep.closeQ) > 0 {
			job := ep.closeQ[0]
			ep.closeQ[0] = closeJob{}
			ep.closeQ = ep.closeQ[1:]
			if len(ep.closeQ) == 0 {
				ep.closeQ = nil // let the array go
			}
			p.mu.Unlock()
			closeController(job.c)
			p.mu.Lock()
			if !job.s.uncounted {
				ep.sessions--
			}
			job.s.cr.pins--
			p.gcLocked(job.s.cr)
			p.wakeLocked(ep)
			if job.counted {
				p.counted--
				p.drainedLocked()
			}
		}
		ep.closing = false
		ep = p.nextReadyLocked()
	}
	p.closers--
}

// nextReadyLocked takes the next BMC whose closes wait for a closer (p.mu
// held), or nil.
func (p *Pool) nextReadyLocked() *endpoint {
	for len(p.readyQ) > 0 {
		ep := p.readyQ[0]
		p.readyQ[0] = nil
		p.readyQ = p.readyQ[1:]
		if len(p.readyQ) == 0 {
			p.readyQ = nil
		}
		if ep.ready && !ep.closing && len(ep.closeQ) > 0 {
			ep.closing, ep.ready = true, false
			return ep
		}
	}
	return nil
}

func closeController(c Controller) {
	switch cl := c.(type) {
	case interface{ CloseContext(context.Context) error }:
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = cl.CloseContext(ctx)
	case interface{ Close() error }:
		done := make(chan struct{})
		go func() { _ = cl.Close(); close(done) }()
		t := time.NewTimer(closeTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
}

// wakeLocked wakes whoever waits on ep's state (p.mu held).
func (p *Pool) wakeLocked(ep *endpoint) {
	if ep.wake != nil {
		close(ep.wake)
		ep.wake = nil
	}
}

// waitLocked waits (p.mu held, released while waiting) until ep's state
// changes or ctx is done.
func (p *Pool) waitLocked(ctx context.Context, ep *endpoint, op, why string) error {
	if ep.wake == nil {
		ep.wake = make(chan struct{})
	}
	ch := ep.wake
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	p.mu.Lock()
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Class: ClassBusy, Message: why, Err: err}
	}
	return nil
}

// evictLocked closes the least recently used idle live session of ep
// for a login that needs its place, at most once every LoginInterval (p.mu
// held); an idle session that serves no host (a kept one no host joined)
// goes first, at any time, and is not counted: closing it takes no host's
// session away. While such a session is busy (a host joining it) none
// that serves hosts is closed: the login waits for it. It reports whether
// it did, and if not whether waiting may help (a session is in use and
// will become idle, or is being logged out). Reads and power commands
// together close two sessions per BMC per LoginInterval
// (endpoint.evicts): a read's login (by nil) only if none was closed in
// the last LoginInterval and no command's in the last two
// (endpoint.cmdEvict), a power command's login (by: its host; On,
// Off, Reset: a fence) if fewer than two were, and past that budget,
// which reads cannot use, still one for a host whose commands closed
// none in the last two LoginIntervals (entry.cmdEvict): a fence of a
// host with proven credentials is not refused because its neighbours'
// reads or fences spent the budget (TestReview35_ReadSpendsFenceBudget,
// TestReview35_ThirdFenceRefusedForAMinute), while commands in a loop
// cost two logins per LoginInterval at most, not one each
// (TestReview35_CommandLoopThrashesLogins). A session being logged out
// makes a command wait for it, as it makes a read.
//
// joined is the kept session being joined, if any: the caller bounds its
// wait for that join (joinWait), and retires it if the join outlasts
// that.
func (p *Pool) evictLocked(ep *endpoint, now time.Time, by *entry) (evicted, wait bool, joined *session) {
	var victim *session
	pending := false         // a session that serves no host is busy: free to close once idle
	for s := range ep.live { // at most MaxSessions
		if s.inUse > 0 || s.joins > 0 { // a joined session would stay open: no slot
			wait = true
			if len(s.entries) == 0 {
				pending = true
				if s.inUse == 0 {
					joined = s
				}
			}
			continue
		}
		if victim == nil || lessRecent(s, victim) {
			victim = s
		}
	}
	if victim == nil {
		return false, wait || ep.sessions > len(ep.live), joined
	}
	if len(victim.entries) == 0 {
		p.retireLocked(victim) // serves no host: no eviction of anyone's
		return true, true, nil
	}
	if pending {
		// A kept session is being joined: once the join ends it is
		// closed at no host's cost (or it serves the joiner): wait.
		return false, true, joined
	}
	closing := ep.sessions > len(ep.live)
	recent := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) < p.cfg.LoginInterval }
	command := by != nil
	spent := 0 // of the budget of reads and commands
	for _, t := range ep.evicts {
		if recent(t) {
			spent++
		}
	}
	// Past the budget, a host's fence still closes one if this host's
	// commands closed none in the last two LoginIntervals: a host fenced
	// for the first time in a while is not refused, a loop of commands
	// is held to the budget.
	exempt := command && (by.cmdEvict.IsZero() || now.Sub(by.cmdEvict) >= 2*p.cfg.LoginInterval)
	// A read closes none within two LoginIntervals of a command's
	// eviction: commands that keep needing places (a loop, a fencing
	// storm) keep the budget to themselves.
	cmdRecent := !ep.cmdEvict.IsZero() && now.Sub(ep.cmdEvict) < 2*p.cfg.LoginInterval
	if recent(ep.lastEvict) && (!command || closing) || !command && cmdRecent || command && spent >= 2 && !exempt {
		// A session being logged out (one closed for another login, whose
		// session this one may then join) changes the picture: wait.
		return false, closing, nil
	}
	ep.lastEvict = now
	ep.evicts[0], ep.evicts[1] = now, ep.evicts[0]
	if command {
		by.cmdEvict, ep.cmdEvict = now, now
	}
	p.retireLocked(victim)
	return true, true, nil
}

// joinWait is how long a login waits for a host's join of a kept session
// (one that serves no host) before it retires that session (logged out
// once the join ends, never cutting it short) and logs in one over the
// bound: half of the caller's time left (the call itself needs the rest),
// and at most a third of ConnectTimeout: a join that hangs (a dead blade's
// system) never holds a working host's fence for the join's whole bound.
func (p *Pool) joinWait(ctx context.Context) time.Duration {
	d := p.cfg.ConnectTimeout / 3
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	return max(d, 0)
}

// trimLocked closes the least recently used idle live sessions of ep
// other than keep while more than MaxSessions are live or held for
// evicting logins (p.mu held): after a login of credentials not yet
// proven went over the bound, or once a session that was in use then
// becomes idle.
func (p *Pool) trimLocked(ep *endpoint, keep *session) {
	for ep.nlive+ep.reserved > p.cfg.MaxSessions {
		var victim *session
		for s := range ep.live { // at most MaxSessions+1
			if s != keep && s.inUse == 0 && (victim == nil || lessRecent(s, victim)) {
				victim = s
			}
		}
		if victim == nil {
			return
		}
		if len(victim.entries) > 0 { // one that serves no host is not counted (evictLocked)
			ep.lastEvict = p.cfg.Now()
		}
		p.retireLocked(victim)
	}
}

// lessRecent reports whether session a goes before b when one must be
// closed: one that serves no host (a kept session no host has joined)
// before any that serves hosts, then the one used less recently, and of
// two last used at the same time, the one logged in later (the older
// stays: its hosts have used it longer), so that the choice never
// depends on a map's order.
func lessRecent(a, b *session) bool {
	if an, bn := len(a.entries) == 0, len(b.entries) == 0; an != bn {
		return an
	}
	if !a.lastUsed.Equal(b.lastUsed) {
		return a.lastUsed.Before(b.lastUsed)
	}
	return a.seq > b.seq
}

// unparkLocked takes cr off the parked logins, if it is there (p.mu held).
func (p *Pool) unparkLocked(cr *creds) {
	if cr.parkedAt != 0 {
		heap.Remove(&p.parked, cr.parkedAt-1)
	}
}

// parkedHeap is the parked logins, the soonest back-off over first
// (container/heap).
type parkedHeap []*creds

func (h parkedHeap) Len() int           { return len(h) }
func (h parkedHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }

func (h parkedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].parkedAt, h[j].parkedAt = i+1, j+1
}

func (h *parkedHeap) Push(x any) {
	cr := x.(*creds)
	cr.parkedAt = len(*h) + 1
	*h = append(*h, cr)
}

func (h *parkedHeap) Pop() any {
	old := *h
	n := len(old) - 1
	cr := old[n]
	old[n] = nil
	cr.parkedAt = 0
	*h = old[:n]
	if n == 0 {
		*h = nil // let the array go after churn
	}
	return cr
}
