package redfish

import (
	"container/list"
	"context"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Read places (Config.MaxInFlight). A session has MaxInFlight places for
// its reads and one extra place, for a probe or a suspect system's read.
//
// A read holds its place until its request returned and its answer's
// body was read to its end or closed (the BMC sends the body meanwhile),
// unless the BMC has shown that its system hangs: a read of another
// system, sent after it, answered within its own overdue time
// (overdueAfter), while the first has been unanswered for four times as
// long as that answer took, for its usual overdue time (usualOverdue),
// and for four times as long as its own system's last answered read took
// (when it began), at least 200 ms (the evidence). The read, a GET, is
// then cut: its request is cancelled, its system is suspect and it waits
// again (a read other than a GET is never cut: it keeps its place); its
// place goes to another read once the cut request returned (and
// cutGrace later, below). So the BMC
// is sent no more than MaxInFlight + 1 reads at once, whatever the
// evidence (TestReview35w_SlowBMCPassesMaxInFlight,
// TestReview35_CachedSystemFreesSlowBMCReads). A BMC that is merely slow
// answers no read that much faster than the reads sent before it, nor a
// system's read much slower than that system's last, so its reads are
// not cut; one that answers a system from its cache at once while the
// others' reads turn slow has those slow reads cut and sent again, the
// suspect systems' one at a time through the extra place, until one of
// each is answered (its system's answer time then keeps its later reads
// from being cut), with never more reads at once. Dead blades (systems
// whose reads hang while the BMC answers the others) give their places
// up as soon as a healthy blade's read is answered beside them
// (TestReview35v_DeadBladesReadsStarveHealthyReads).
//
// A system one of whose reads ended unanswered after it was at the BMC
// for twice the usual answer time (doubtAfter, as it was when the read
// began, never raised by a late answer, at least 200 ms) is doubtful
// until one of its reads is answered. Waiting reads take the
// MaxInFlight places in rank order: the reads of systems that are not
// doubtful first, in line; then the doubtful systems', the one answered
// last first. A waiting read cuts (cancels the request of) a read of a
// doubtful or suspect system in one of those places if it ranks higher and its own system was answered
// since the other became doubtful, one cut at a time: the cut read
// waits again, first in line of its rank, and the waiting read takes the
// place once the cut request returned. So dead blades polled with
// deadlines shorter than the overdue time, or after a late answer raised
// it, hold no place a healthy blade's read wants once each left a read
// unanswered at the BMC for twice the usual answer time
// (TestReview35_DeadBladesNeverSuspectOnUsualSlowBMC,
// TestReview35_LateAnswerKeepsDeadBladesOffSuspect,
// TestReview35_DeadBladesHoldPlacesUnderFourUsualAnswers); a monitor
// whose deadline is shorter than that leaves them holding places (it
// gives a healthy read little more than its answer time). A healthy blade
// whose caller gave up on one slow read waits for no doubtful or
// suspect dead blade
// (TestReview35_HealthyBladeSuspectAfterOneMissedCheck).
//
// While every MaxInFlight place is held by an overdue read and a read of
// a system that is not suspect waits, the extra place takes, as a probe,
// the read that began waiting last of the systems that are not doubtful
// (a monitor's reads that waited longest are likeliest of the sweep
// whose reads hang), else the doubtful system's answered last. The extra
// place's read (a GET), once overdue while a probe is wanted, is cut: it
// waits again, first in line, and the extra place takes the next probe
// once the cut request returned. A probe answered in time is the
// evidence; one answered late is a slow BMC's, whose late answer raises
// the overdue time (answered).
//
// A suspect system's reads take only the extra place, one at a time
// (when no probe is wanted), and hold it until they end or are cut for a
// probe; one of its reads answered clears the suspicion. Dead blades
// polled by a monitor hold that one place together, never the places of
// the healthy blades' reads
// (TestReview35w_HealthyBladeSuspectStarvedByDeadBlades).
//
// Reads sent on a session and not yet returned (with their answers'
// bodies), at once: MaxInFlight + 1 at most. A cut request's connection
// is closed, and its place is taken again (by any read) cutGrace (10 ms)
// after the request returned, for the BMC to notice the closed
// connection; a BMC that finishes the work of a closed connection anyway
// may be working on it still.

// overdueFloor and overdueFactor: a read is overdue once it has been in
// flight overdueFactor times the session's usual answer time (a moving
// average of its answered reads), and at least overdueFloor.
const (
	overdueFloor  = 200 * time.Millisecond
	overdueFactor = 4
)

// doubtFactor: a read unanswered at the BMC for doubtFactor times the
// session's usual answer time (never raised by a late answer), and at
// least overdueFloor, makes its system doubtful (settleRead).
const doubtFactor = 2

// overdueFloorSet, if not 0, replaces overdueFloor (ns): a test's, to
// look at the cap with reads that hang longer than their caller waits.
var overdueFloorSet atomic.Int64

// readStats is a session's record of its reads' answer times.
type readStats struct {
	avg   atomic.Int64 // moving average of answered reads' durations, raised by late answers (ns; 0: none yet)
	plain atomic.Int64 // the same average, never raised (ns; 0: none yet)
}

// floor is overdueFloor, or the test's.
func floor() time.Duration {
	if f := overdueFloorSet.Load(); f != 0 {
		return time.Duration(f)
	}
	return overdueFloor
}

// overdueAfter returns how long a read on s may hold its place before it
// is overdue.
func (s *session) overdueAfter() time.Duration {
	return max(floor(), overdueFactor*time.Duration(s.stats.avg.Load()))
}

// usualOverdue returns the usual overdue time of s, never raised by a
// late answer: a read younger than that is not shown to hang.
func (s *session) usualOverdue() time.Duration {
	return max(floor(), overdueFactor*time.Duration(s.stats.plain.Load()))
}

// doubtAfter returns how long a read unanswered at the BMC makes its
// system doubtful: twice the usual answer time of s, never raised by a
// late answer, at least overdueFloor.
func (s *session) doubtAfter() time.Duration {
	return max(floor(), doubtFactor*time.Duration(s.stats.plain.Load()))
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
	ewma(&s.stats.plain, d, 0)
	raise := int64(0)
	if late {
		raise = int64(min(2*d, lateRaiseMax) / overdueFactor)
	}
	ewma(&s.stats.avg, d, raise)
}

// ewma moves the average a towards d by an eighth (to d at once if a
// had none), and to at least floor.
func ewma(a *atomic.Int64, d time.Duration, floor int64) {
	for {
		old := a.Load()
		next := int64(d)
		if old != 0 {
			next = old - old/8 + int64(d)/8
		}
		if a.CompareAndSwap(old, max(next, floor)) {
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

// readPlaces are a session's read places. Every operation is
// O(MaxInFlight + waiting reads) at most.
type readPlaces struct {
	mu       sync.Mutex
	max      int           // MaxInFlight
	held     int           // MaxInFlight places held
	reads    []*readTicket // the reads holding them
	overdue  []*readTicket // of those, the overdue reads
	extra    *readTicket   // the extra place's read, a probe or a suspect system's (nil: free)
	waiting  list.List     // *readWaiter of systems neither doubtful nor suspect, first in line first
	doubts   list.List     // *readWaiter of doubtful systems, first in line first
	suspects list.List     // *readWaiter of suspect systems, first in line first
	// evidence: the start and the answer time of the latest-sent read
	// of a system answered within its overdue time (zero: none yet).
	evidence time.Time
	took     time.Duration
}

// provesLocked reports whether the evidence shows, at now, that t's
// system hangs: a read of another system sent after t was answered
// within its own overdue time, and t has been unanswered overdueFactor
// times as long, its usual overdue time (usualOverdue when it began),
// and overdueFactor times as long as its own system's last answered
// read took (when it began), at least overdueFloor.
func (p *readPlaces) provesLocked(t *readTicket, now time.Time) bool {
	return t.ready && !t.back && p.evidence.After(t.start) && now.Sub(t.start) >= max(floor(), overdueFactor*p.took, t.usual, overdueFactor*t.own)
}

func newReadPlaces(n int) *readPlaces { return &readPlaces{max: n} }

// readWaiter is a read waiting for a place.
type readWaiter struct {
	got  chan *readTicket // the place, once granted (buffered)
	el   *list.Element
	in   *list.List
	get  bool  // a GET: it may be a probe, and be cut
	rank int64 // its system's rank (rank)
	c    *Controller
}

// rank orders the systems whose reads wait: one neither doubtful nor
// suspect first, else the one answered last (UnixNano; 0: never).
func (c *Controller) rank() int64 {
	if !c.doubt.Load() && !c.suspect.Load() {
		return math.MaxInt64
	}
	return c.lastAnswer.Load()
}

// readTicket is a read's hold on a place.
type readTicket struct {
	p     *readPlaces
	c     *Controller
	kind  placeKind
	start time.Time
	due   time.Duration // the overdue time when it began
	doubt time.Duration // doubtAfter when it began
	usual time.Duration // the usual overdue time when it began (usualOverdue)
	own   time.Duration // how long its system's last answered read took, when it began (0: none)
	get   bool
	proof bool // a read of its system (not one beside it): its answer may be evidence
	ctx   context.Context
	abort context.CancelFunc // cuts its request (a GET's)
	timer *time.Timer
	// Under p.mu:
	ready bool // sent: start and abort are set
	back  bool // its request returned (its answer's body may be read still)
	held  bool // it holds its place
	late  bool // its overdue time passed
	cut   bool // it was cut
}

// grantLocked hands free places to waiting reads: the MaxInFlight
// places by rank (nextLocked), cutting a lower-ranked doubtful or
// suspect system's read for the best waiting read (preemptLocked); the
// extra place to a probe while one is wanted, else to the first suspect
// system's read. It cuts the extra place's read (a GET) once overdue
// while a probe is wanted.
func (p *readPlaces) grantLocked() {
	for p.held < p.max {
		w := p.nextLocked()
		if w == nil {
			break
		}
		p.give(w, placeRead)
	}
	p.preemptLocked()
	wanted := p.probeWantedLocked()
	if t := p.extra; t != nil {
		if wanted && t.late && t.get && !t.cut && !t.back {
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
		if w := bestLocked(&p.doubts, true); w != nil {
			p.give(w, placeProbe)
			return
		}
	}
	if p.suspects.Len() > 0 {
		p.give(p.suspects.Front().Value.(*readWaiter), placeSuspect)
	}
}

// nextLocked returns the waiting read a MaxInFlight place goes to next
// (nil: none): the first in line of the systems neither doubtful nor
// suspect, else the doubtful system's answered last.
func (p *readPlaces) nextLocked() *readWaiter {
	if e := p.waiting.Front(); e != nil {
		return e.Value.(*readWaiter)
	}
	return bestLocked(&p.doubts, false)
}

// bestLocked returns the highest-ranked waiter of l, first in line of
// its rank (only a GET if get; nil: none).
func bestLocked(l *list.List, get bool) *readWaiter {
	var best *readWaiter
	for e := l.Front(); e != nil; e = e.Next() {
		if w := e.Value.(*readWaiter); (!get || w.get) && (best == nil || w.rank > best.rank) {
			best = w
		}
	}
	return best
}

// preemptLocked cuts, for the read a MaxInFlight place goes to next, the
// lowest-ranked read of a doubtful or suspect system holding one, if
// that ranks lower and the waiting read's system was answered since the
// other's became doubtful (systems that hung together do not cut each
// other's reads), unless a cut is under way already.
func (p *readPlaces) preemptLocked() {
	w := p.nextLocked()
	if w == nil {
		return
	}
	var low *readTicket
	var lowRank int64
	for _, t := range p.reads {
		if t.cut {
			return // its place goes to w once its request returned
		}
		if !t.ready || t.back || !t.get || !t.c.doubt.Load() && !t.c.suspect.Load() {
			continue
		}
		if r := t.c.rank(); r < w.rank && w.rank > t.c.doubtSince.Load() && (low == nil || r < lowRank) {
			low, lowRank = t, r
		}
	}
	if low != nil {
		low.cut = true
		low.abort()
	}
}

// probeWantedLocked: a read of a system not suspect waits while every
// MaxInFlight place is held by an overdue read.
func (p *readPlaces) probeWantedLocked() bool {
	return p.waiting.Len()+p.doubts.Len() > 0 && p.held == p.max && len(p.overdue) == p.held
}

// give grants w place k.
func (p *readPlaces) give(w *readWaiter, k placeKind) {
	w.in.Remove(w.el)
	w.el, w.in = nil, nil
	t := &readTicket{p: p, c: w.c, kind: k, held: true, get: w.get}
	if k == placeRead {
		p.held++
		p.reads = append(p.reads, t)
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
		p.reads = remove(p.reads, t)
		p.overdue = remove(p.overdue, t)
	default:
		p.extra = nil
	}
}

// remove returns ts without t (in place).
func remove(ts []*readTicket, t *readTicket) []*readTicket {
	for i, o := range ts {
		if o == t {
			return append(ts[:i], ts[i+1:]...)
		}
	}
	return ts
}

// proveLocked cuts t's request and makes its system suspect if the
// evidence shows, at now, that it hangs (provesLocked): t keeps its place
// until the cut request returned, and its read waits again. Not the
// extra place's suspect read (its system is suspect already), nor a read
// other than a GET (it is not sent again: it keeps its place).
func (p *readPlaces) proveLocked(t *readTicket, now time.Time) {
	if t.kind == placeSuspect || !t.get || t.cut || !p.provesLocked(t, now) {
		return
	}
	t.cut = true
	t.abort()
	if t.proof {
		t.c.suspect.Store(true)
	}
}

// overdueFired: t's overdue time passed. It gives its place up if the
// evidence shows its system hangs (proveLocked); else it keeps it, and a
// probe may be wanted.
func (t *readTicket) overdueFired() {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if !t.held || t.back {
		return
	}
	t.late = true
	p.proveLocked(t, time.Now())
	if t.held && t.kind == placeRead {
		p.overdue = append(p.overdue, t)
	}
	p.grantLocked()
}

// take waits for a place for a read of c's (get: a GET; again: it was
// cut, it is first in line of its rank), as long as ctx allows, and
// starts its overdue timer.
func (p *readPlaces) take(ctx context.Context, c *Controller, get, again bool) (*readTicket, error) {
	w := &readWaiter{got: make(chan *readTicket, 1), get: get, c: c, rank: c.rank()}
	p.mu.Lock()
	switch {
	case c.suspect.Load():
		w.in = &p.suspects
	case c.doubt.Load():
		w.in = &p.doubts
	default:
		w.in = &p.waiting
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
	t.due, t.doubt, t.usual = c.sess.overdueAfter(), c.sess.doubtAfter(), c.sess.usualOverdue()
	t.own = time.Duration(c.lastTook.Load())
	t.ctx, t.abort = ctx, func() {}
	if t.get {
		t.ctx, t.abort = context.WithCancel(ctx)
	}
	p.mu.Lock()
	t.start = time.Now()
	t.ready = true
	t.timer = time.AfterFunc(t.due, t.overdueFired)
	p.grantLocked() // a waiting read may rank higher
	p.mu.Unlock()
	return t, nil
}

// cutGrace is how long a cut read's place stays held after its request
// returned: the BMC notices the closed connection a moment after the
// client closed it, and works on the request until then.
const cutGrace = 10 * time.Millisecond

// free gives t's place back and ends its request's context; a cut
// read's place only cutGrace later.
func (t *readTicket) free() {
	t.abort()
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.cut && t.held {
		time.AfterFunc(cutGrace, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.freeLocked(t)
			p.grantLocked()
		})
		return
	}
	p.freeLocked(t)
	p.grantLocked()
}

// end records that t's request returned (answered: the BMC sent an HTTP
// answer below 500) after d, and the evidence; t keeps its place until
// free (the answer's body is read from the BMC meanwhile). It reports
// whether t was cut before its answer (its read waits again).
func (t *readTicket) end(answered bool, d time.Duration) (cut bool) {
	if t.timer != nil {
		t.timer.Stop()
	}
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	t.back = true
	cut = t.cut && !answered
	if answered && t.proof && d <= t.due && t.start.After(p.evidence) {
		p.evidence, p.took = t.start, d
		now := time.Now()
		for _, o := range append([]*readTicket(nil), p.reads...) {
			p.proveLocked(o, now)
		}
		if o := p.extra; o != nil {
			p.proveLocked(o, now)
		}
	}
	p.grantLocked()
	return cut
}

// readPlace is the hold of one read (reqPath.do) on the places of c's
// session: none for a power command's (isCommand) or on a session
// without places.
type readPlace struct {
	c       *Controller
	ctx     context.Context
	get     bool
	proof   bool // a read of the system's own (not beside it)
	t       *readTicket
	atBMC   time.Duration // time its attempts spent at the BMC
	doubtAt time.Duration // its first attempt's doubtAfter
	tries   int
	cut     bool // its last attempt was cut
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
			r.c.settleRead(false, 0, r.atBMC, r.doubtAt)
		}
		return nil, err
	}
	t.proof = r.proof
	r.t = t
	if r.tries == 0 {
		r.doubtAt = t.doubt
	}
	r.tries++
	return t.ctx, nil
}

// done ends the attempt (answered: an HTTP answer below 500 came, path.go). It reports
// whether to send the read again: it was cut, and its caller still
// waits (its place is given back). Else the place is given back by
// release.
func (r *readPlace) done(answered bool) (again bool) {
	t := r.t
	if t == nil {
		return false
	}
	d := time.Since(t.start)
	r.atBMC += d
	r.cut = t.end(answered, d)
	if r.cut && r.ctx.Err() == nil {
		r.t = nil
		t.free()
		return true
	}
	r.c.settleRead(answered, d, r.atBMC, r.doubtAt)
	return false
}

// release gives the place of the read's last attempt back, and ends its
// context, once nothing of it is read any more: at once if it has no
// answer (resp nil), else when the answer's body is read to its end or
// closed (an answer's body is read after done, and the BMC is sending
// it meanwhile: TestReview35_CachedSystemFreesSlowBMCReads counts such
// a read as the BMC's).
func (r *readPlace) release(resp *http.Response) {
	t := r.t
	if t == nil {
		return
	}
	r.t = nil
	if resp == nil {
		t.free()
		return
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, release: t.free}
}

// releaseBody calls release once read to its end (or a failure), or
// closed.
type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// settleRead records the end of a read of c's whose last attempt took d
// and which spent atBMC at the BMC in all: an answer clears c's
// suspicion and doubt and counts towards the session's answer time; a
// read the BMC left unanswered for doubtAt (the usual overdue time when
// it began) makes c doubtful. A caller that gives up sooner (a health
// check's short deadline) proves nothing. Suspicion comes from evidence
// only (proveLocked).
func (c *Controller) settleRead(answered bool, d, atBMC, doubtAt time.Duration) {
	switch {
	case answered:
		c.lastAnswer.Store(time.Now().UnixNano())
		c.lastTook.Store(int64(d))
		c.suspect.Store(false)
		c.doubt.Store(false)
		c.sess.answered(d)
	case doubtAt > 0 && atBMC >= doubtAt && !c.doubt.Load():
		c.doubtSince.Store(time.Now().UnixNano()) // a system's reads end one at a time
		c.doubt.Store(true)
	}
}
