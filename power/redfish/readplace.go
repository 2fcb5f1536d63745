package redfish

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Read places (Config.MaxInFlight). A session has MaxInFlight places for
// its reads and one extra place, for a probe or a suspect system's read.
//
// A read holds its place until it ends. A read still unanswered after
// its overdue time (overdueAfter) gives its place up only once the BMC
// has shown that it is not merely slow: a read of another system, sent
// after the overdue read, answered within its own overdue time and within
// the overdue read's (the evidence). A BMC that is merely slow answers no
// read that fast while the reads sent before it hang, so its overdue reads
// keep their places: the BMC is sent no more than MaxInFlight + 1 reads
// at once (TestReview35w_SlowBMCPassesMaxInFlight). Dead blades (systems
// whose reads hang while the BMC answers the others) give their places
// up as soon as a healthy blade's read is answered beside them
// (TestReview35v_DeadBladesReadsStarveHealthyReads).
//
// That answer needs a place: while every MaxInFlight place is held by an
// overdue read and a read of a system that is not suspect waits, the
// extra place takes, as a probe, the read that began waiting last (a
// monitor's reads that waited longest are likeliest of the sweep whose
// reads hang). The extra place's read (a GET), once overdue while a probe
// is wanted, is cut (its request cancelled): it waits again, first in
// line, and the extra place takes the next probe once the cut request
// returned. So probes of dead blades keep a healthy blade's read from the
// BMC for one overdue time each, not until the dead blades' callers give
// up. A probe answered in time is the evidence; one answered late is a
// slow BMC's, whose late answer raises the overdue time (answered).
//
// A system one of whose reads was left at the BMC unanswered for twice
// its overdue time or more (suspectAfter) is suspect until one of its
// reads is answered: its reads take only the extra place, one at a time
// (when no probe is wanted), and hold it until they end or are cut for a
// probe. Dead blades polled by a monitor hold that one place together,
// never the places of the healthy blades' reads
// (TestReview35w_HealthyBladeSuspectStarvedByDeadBlades).
//
// Reads sent and not yet returned on a session, at once: MaxInFlight + 1,
// plus the overdue reads the evidence freed (at most one per system,
// each system's requests being sent one at a time). A cut request's
// connection is closed; a BMC that finishes the work of a closed
// connection anyway may be working on it still.

// overdueFloor and overdueFactor: a read is overdue once it has been in
// flight overdueFactor times the session's usual answer time (a moving
// average of its answered reads), and at least overdueFloor.
const (
	overdueFloor  = 200 * time.Millisecond
	overdueFactor = 4
)

// overdueFloorSet, if not 0, replaces overdueFloor (ns): a test's, to
// look at the cap with reads that hang longer than their caller waits.
var overdueFloorSet atomic.Int64

// readStats is a session's record of its reads' answer times.
type readStats struct {
	avg atomic.Int64 // moving average of answered reads' durations (ns; 0: none yet)
}

// overdueAfter returns how long a read on s may hold its place.
func (s *session) overdueAfter() time.Duration {
	floor := overdueFloor
	if f := overdueFloorSet.Load(); f != 0 {
		floor = time.Duration(f)
	}
	return max(floor, overdueFactor*time.Duration(s.stats.avg.Load()))
}

// lateRaiseMax bounds the overdue time a late answer raises (answered).
const lateRaiseMax = 2 * time.Second

// answered records a read answered after d. A late answer (d past the
// overdue time: a slow BMC, not a dead system, since dead systems do not
// answer) raises the average at once so that reads like it are no longer
// overdue (the overdue time becomes twice d, at most lateRaiseMax)
// (TestSlowBMCLateAnswerKeepsMaxInFlight).
func (s *session) answered(d time.Duration) {
	late := d > s.overdueAfter()
	for {
		old := s.stats.avg.Load()
		next := int64(d)
		if old != 0 {
			next = old - old/8 + int64(d)/8
		}
		if late {
			next = max(next, int64(min(2*d, lateRaiseMax)/overdueFactor))
		}
		if s.stats.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// placeKind names the place a read holds.
type placeKind int8

const (
	placeRead    placeKind = iota + 1 // one of the MaxInFlight places
	placeProbe                        // the extra place, as a probe
	placeSuspect                      // the extra place, for a suspect system's read
)

// readPlaces are a session's read places. Every operation is O(1) but
// the scans of the overdue reads (at most MaxInFlight) and the probe's
// scan from the last waiter for a GET (the adapter's reads are GETs: the
// first it looks at).
type readPlaces struct {
	mu       sync.Mutex
	max      int           // MaxInFlight
	held     int           // MaxInFlight places held
	overdue  []*readTicket // of those, the overdue reads (no evidence yet)
	extra    *readTicket   // the extra place's read, a probe or a suspect system's (nil: free)
	waiting  list.List     // *readWaiter of systems not suspect, first in line first
	suspects list.List     // *readWaiter of suspect systems, first in line first
	// evidence: the start and the answer time of the latest-sent read
	// of a system answered within its overdue time (zero: none yet). It
	// frees an overdue read sent before it whose overdue time is at least
	// took.
	evidence time.Time
	took     time.Duration
}

// provesLocked reports whether the evidence frees t: a read of another
// system sent after t was answered within t's overdue time (t, unanswered
// past that time, is its own system's hang, not a slow BMC's).
func (p *readPlaces) provesLocked(t *readTicket) bool {
	return t.late && p.evidence.After(t.start) && p.took <= t.due
}

func newReadPlaces(n int) *readPlaces { return &readPlaces{max: n} }

// readWaiter is a read waiting for a place.
type readWaiter struct {
	got chan *readTicket // the place, once granted (buffered)
	el  *list.Element
	in  *list.List
	get bool // a GET: it may be a probe, and be cut
}

// readTicket is a read's hold on a place.
type readTicket struct {
	p     *readPlaces
	kind  placeKind
	start time.Time
	due   time.Duration // the overdue time when it began
	get   bool
	proof bool // a read of its system (not one beside it): its answer may be evidence
	ctx   context.Context
	abort context.CancelFunc // cuts a probe's request
	timer *time.Timer
	// Under p.mu:
	held bool // it holds its place
	late bool // its overdue time passed
	cut  bool // the probe was cut
}

// grantLocked hands free places to waiting reads: the MaxInFlight
// places first in line first; the extra place to a probe while one is
// wanted, else to the first suspect system's read. It cuts the extra
// place's read (a GET) once overdue while a probe is wanted.
func (p *readPlaces) grantLocked() {
	for p.held < p.max && p.waiting.Len() > 0 {
		p.give(p.waiting.Front().Value.(*readWaiter), placeRead)
	}
	wanted := p.probeWantedLocked()
	if t := p.extra; t != nil {
		if wanted && t.late && t.get && !t.cut {
			t.cut = true
			t.abort()
		}
		return
	}
	if wanted {
		for e := p.waiting.Back(); e != nil; e = e.Prev() { // the last in line that may probe
			if w := e.Value.(*readWaiter); w.get {
				p.give(w, placeProbe)
				return
			}
		}
	}
	if p.suspects.Len() > 0 {
		p.give(p.suspects.Front().Value.(*readWaiter), placeSuspect)
	}
}

// probeWantedLocked: a read of a system not suspect waits while every
// MaxInFlight place is held by an overdue read.
func (p *readPlaces) probeWantedLocked() bool {
	return p.waiting.Len() > 0 && p.held == p.max && len(p.overdue) == p.held
}

// give grants w place k.
func (p *readPlaces) give(w *readWaiter, k placeKind) {
	w.in.Remove(w.el)
	w.el, w.in = nil, nil
	t := &readTicket{p: p, kind: k, held: true, get: w.get}
	if k == placeRead {
		p.held++
	} else {
		p.extra = t
	}
	w.got <- t
}

// freeLocked gives t's place back.
func (p *readPlaces) freeLocked(t *readTicket) {
	if !t.held {
		return
	}
	t.held = false
	switch t.kind {
	case placeRead:
		p.held--
		for i, o := range p.overdue {
			if o == t {
				p.overdue = append(p.overdue[:i], p.overdue[i+1:]...)
				break
			}
		}
	default:
		p.extra = nil
	}
}

// overdueFired: t's overdue time passed. A read of a MaxInFlight place,
// or a probe, gives its place up if the evidence proves its system hangs
// (provesLocked); else it keeps it, and a probe may be wanted.
func (t *readTicket) overdueFired() {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if !t.held {
		return
	}
	t.late = true
	switch {
	case t.kind != placeSuspect && p.provesLocked(t):
		p.freeLocked(t)
	case t.kind == placeRead:
		p.overdue = append(p.overdue, t)
	}
	p.grantLocked()
}

// take waits for a place for a read of c's (get: a GET; again: a probe
// of it was cut, it is first in line), as long as ctx allows, and starts
// its overdue timer.
func (p *readPlaces) take(ctx context.Context, c *Controller, get, again bool) (*readTicket, error) {
	w := &readWaiter{got: make(chan *readTicket, 1), get: get}
	p.mu.Lock()
	w.in = &p.waiting
	if c.suspect.Load() {
		w.in = &p.suspects
	}
	if again {
		w.el = w.in.PushFront(w)
	} else {
		w.el = w.in.PushBack(w)
	}
	p.grantLocked()
	p.mu.Unlock()
	var t *readTicket
	select {
	case t = <-w.got:
	case <-ctx.Done():
		p.mu.Lock()
		if w.el != nil {
			w.in.Remove(w.el)
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		t = <-w.got // granted meanwhile: given back
		p.freeLocked(t)
		p.grantLocked()
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	t.due = c.sess.overdueAfter()
	t.ctx, t.abort = ctx, func() {}
	if t.kind != placeRead && t.get {
		t.ctx, t.abort = context.WithCancel(ctx)
	}
	p.mu.Lock()
	t.start = time.Now()
	t.timer = time.AfterFunc(t.due, t.overdueFired)
	p.mu.Unlock()
	return t, nil
}

// end gives t's place back once its request returned (answered: the BMC
// sent an HTTP answer below 500) after d, and records the evidence. It reports
// whether t was a probe cut before its answer (its read waits again).
func (t *readTicket) end(answered bool, d time.Duration) (cut bool) {
	if t.timer != nil {
		t.timer.Stop()
	}
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freeLocked(t)
	cut = t.cut && !answered
	if answered && t.proof && d <= t.due && t.start.After(p.evidence) {
		p.evidence, p.took = t.start, d
		for i := 0; i < len(p.overdue); {
			if o := p.overdue[i]; p.provesLocked(o) {
				o.held = false
				p.held--
				p.overdue = append(p.overdue[:i], p.overdue[i+1:]...)
				continue
			}
			i++
		}
		if o := p.extra; o != nil && o.kind == placeProbe && p.provesLocked(o) {
			p.freeLocked(o)
		}
	}
	p.grantLocked()
	t.abort()
	return cut
}

// readPlace is the hold of one read (reqPath.do) on the places of c's
// session: none for a power command's (isCommand) or on a session
// without places.
type readPlace struct {
	c     *Controller
	ctx   context.Context
	get   bool
	proof bool // a read of the system's own (not beside it)
	t     *readTicket
	atBMC time.Duration // time its attempts spent at the BMC
	tries int
	cut   bool // its last attempt was a probe cut
}

// wait takes a place for the read's next attempt; it returns the context
// to send the attempt with.
func (r *readPlace) wait() (context.Context, error) {
	p := r.c.sess.places
	if p == nil || isCommand(r.ctx) {
		return r.ctx, nil
	}
	t, err := p.take(r.ctx, r.c, r.get, r.tries > 0)
	if err != nil {
		if r.tries > 0 { // cut, then its caller gave up: it ended unanswered
			r.c.settleRead(false, 0, r.atBMC)
		}
		return nil, err
	}
	t.proof = r.proof
	r.t = t
	r.tries++
	return t.ctx, nil
}

// done ends the attempt (answered: an HTTP answer below 500 came, path.go). It reports
// whether to send the read again: its probe was cut, and its caller still
// waits.
func (r *readPlace) done(answered bool) (again bool) {
	t := r.t
	if t == nil {
		return false
	}
	r.t = nil
	d := time.Since(t.start)
	r.atBMC += d
	r.cut = t.end(answered, d)
	if r.cut && r.ctx.Err() == nil {
		return true
	}
	r.c.settleRead(answered, d, r.atBMC)
	return false
}

// suspectAfter: a read left unanswered (its caller gave up, or the
// connection failed) after this many times the overdue time at the BMC
// marks its system suspect. A caller that gives up soon after its read
// went overdue (a health check's short deadline, a slow answer) proves
// no dead system: the suspicion stays as it was
// (TestReview35w_HealthyBladeSuspectStarvedByDeadBlades).
const suspectAfter = 2

// settleRead records the end of a read of c's whose last attempt took d
// and which spent atBMC at the BMC in all: an answer clears c's
// suspicion and counts towards the session's answer time; a read the BMC
// left unanswered for suspectAfter overdue times marks c suspect.
// Suspicion is decided here only, once the read ended (a system's
// requests are sent one at a time: only its next read looks at it).
func (c *Controller) settleRead(answered bool, d, atBMC time.Duration) {
	switch {
	case answered:
		c.suspect.Store(false)
		c.sess.answered(d)
	case atBMC >= suspectAfter*c.sess.overdueAfter():
		c.suspect.Store(true)
	}
}
