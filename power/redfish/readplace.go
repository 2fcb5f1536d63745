package redfish

import (
	"container/list"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Read places (Config.MaxInFlight). A session has MaxInFlight places for
// its reads and one extra place, for a probe or a read of a system in
// doubt. The rule: the MaxInFlight places are the reads' of systems not
// in doubt (a read of a system in doubt holds one only while none of
// theirs waits), and the extra place is the systems' in doubt, the one
// ranked first holding it until its read ends, unless a probe needs it.
// So a read of a system not in doubt waits for no system in doubt beyond
// one cut (TestReview35v_DeadBladesReadsStarveHealthyReads), and a
// system in doubt that answers is first among the systems in doubt after
// a bounded number of its dead neighbours' reads, and then answered if
// its caller waits for its answer, however busy its neighbours keep the
// MaxInFlight places (TestReview35aa_SlowDoubtfulSystemCutForever,
// TestSlowDoubtfulSystemOutranksDeadNeighbour).
//
// In doubt. A read is missed when the BMC left it unanswered for twice
// the usual answer time (doubtAfter, as it was when the read began,
// never raised by a late answer, at least 200 ms) before its caller gave
// up on it, or when the evidence (below) shows it hangs. A system one of
// whose reads was missed is in doubt until one of its reads is answered:
// suspect if the evidence showed it, else doubtful. The systems in doubt
// rank by the reads they missed since their last answer, fewest first,
// then by that answer, the latest first (readRank). The time a read's
// attempts cut to make way for another read (below: a read of a system
// not in doubt waiting for a MaxInFlight place, or a higher-ranked
// system in doubt's waiting for the extra place) spent at the BMC does
// not count: only the BMC's silence does, never a wait for a place. An
// attempt cut for a probe does count: it is cut only once overdue, when
// the BMC left it unanswered for four times the usual answer time
// (doubtAfter is twice that); so while probes are wanted the systems in
// doubt whose reads they cut fall in rank in turn, and a dead blade
// ranked first does not take the extra place back after every probe, ahead
// of its neighbours, for as long as the BMC stays slow
// (TestProbeCutCountsTowardsMiss).
// So a system whose reads are answered within their callers' deadlines
// misses no more reads while it waits, while one whose reads hang misses
// one for each read that holds a place until its caller gives up (past
// doubtAfter). A dead blade polled with deadlines shorter than
// doubtAfter misses a read only when the evidence shows it hangs; until
// then its reads wait in line with the healthy blades' (such a monitor's
// deadline, under twice the usual answer time, gives a healthy read
// little more than its answer time anyway).
//
// The MaxInFlight places go to the reads of systems not in doubt, in
// line. A free one that none of them waits for goes to a doubtful
// system's read (a suspect system's reads never take one), the
// highest-ranked first, while the extra place is held by a probe or by
// a read of a system ranked at least as high (a read of a system ranked
// higher waits for the extra place, which it takes when that read ends,
// and keeps). A read of a system not in doubt that waits while every
// place is held cuts (cancels the request of) the lowest-ranked read (a
// GET) of a system in doubt holding one, one cut at a time; it takes the
// place once the cut request returned (and cutGrace later). So dead blades hold no
// place a read of a system not in doubt waits for once each missed a
// read (TestReview35_DeadBladesNeverSuspectOnUsualSlowBMC,
// TestReview35_LateAnswerKeepsDeadBladesOffSuspect,
// TestReview35_DeadBladesHoldPlacesUnderFourUsualAnswers).
//
// The extra place goes to the highest-ranked waiting read of a system in
// doubt, unless a probe is wanted (below). That read keeps it until it
// ends: it is cut only for a probe, or for a waiting read of a system in
// doubt that ranks higher and was answered later than the holder's
// system (so two systems in doubt never cut each other's reads in turn:
// their answers, which end a doubt, fix which may cut which). So a
// healthy blade whose caller gave up on one slow read ranks above the
// dead blades beside it (it missed one read, they as many or more, and
// it was answered later) and waits for none of them
// (TestReview35_HealthyBladeSuspectAfterOneMissedCheck,
// TestReview35w_HealthyBladeSuspectStarvedByDeadBlades,
// TestReview35aa_HealthyBladeSuspectByEvidenceQueuesBehindDeadBlades);
// and a system in doubt that answers slowly, once ranked first, keeps
// the extra place until its answer.
//
// Evidence. A read (a GET) of a system not in doubt holding a
// MaxInFlight place, or a probe, is shown to hang when a read of another system, sent after
// it, was answered within its own overdue time (overdueAfter), while the
// first has been unanswered four times as long as that answer took, for
// its usual overdue time (usualOverdue), and four times as long as its
// own system's last answered read took (when it began), at least 200 ms.
// The read is then cut and missed: its system is suspect and it waits
// again (a read other than a GET is never cut: it keeps its place). A BMC that is merely slow answers no read that much faster than
// the reads sent before it, nor a system's read much slower than that
// system's last, so its reads are not cut
// (TestReview35w_SlowBMCPassesMaxInFlight); one that answers a system
// from its cache at once while the others' reads turn slow has those
// slow reads cut and sent again through the extra place, one at a time,
// until each is answered (its system's answer time then keeps its later
// reads from being cut) (TestReview35_CachedSystemFreesSlowBMCReads).
//
// Probes. While every MaxInFlight place is held by an overdue read that
// no read may cut (a system not in doubt's, or a read other than a GET)
// and a read of a system not in doubt waits, the extra place takes, as a
// probe, the read of those that began waiting last (a monitor's reads
// that waited longest are likeliest of the sweep whose reads hang). The
// extra place's read (a GET), once overdue while a probe is wanted, is
// cut: it waits again, first in line of its rank, and the probe takes
// the place once the cut request returned (the time of that attempt
// counts towards a miss, above). A probe answered in time is
// the evidence; one answered late is a slow BMC's, whose late answer
// raises the overdue time (answered).
//
// The limit: reads sent on a session and not yet returned (with their
// answers' bodies), on open connections, at once: MaxInFlight + 1 at
// most. A cut request's connection is closed, and its place is taken
// again (by any read) cutGrace (10 ms) after the request returned, for
// the BMC to notice the closed connection. A BMC that goes on working on
// a closed connection's read to its end may be working, besides, on each
// read cut while it still worked on it: the client cannot see that work
// end, and no number bounds it (a dead blade's cut read at such a BMC
// may never end) (TestReview35aa_CutReadsStillWorkedOnPassMaxInFlight).

// overdueFloor and overdueFactor: a read is overdue once it has been in
// flight overdueFactor times the session's usual answer time (a moving
// average of its answered reads), and at least overdueFloor.
const (
	overdueFloor  = 200 * time.Millisecond
	overdueFactor = 4
)

// doubtFactor: a read unanswered at the BMC for doubtFactor times the
// session's usual answer time (never raised by a late answer), and at
// least overdueFloor, makes its system doubtful (readPlace.settle).
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
	placeRead  placeKind = iota + 1 // one of the MaxInFlight places
	placeProbe                      // the extra place, as a probe
	placeDoubt                      // the extra place, for a read of a system in doubt
)

// readPlaces are a session's read places. Every operation is
// O(MaxInFlight + waiting reads) at most.
type readPlaces struct {
	mu       sync.Mutex
	max      int           // MaxInFlight
	held     int           // MaxInFlight places held
	reads    []*readTicket // the reads holding them
	overdue  []*readTicket // of those, the overdue reads
	extra    *readTicket   // the extra place's read, a probe or a read of a system in doubt (nil: free)
	waiting  list.List     // *readWaiter of systems not in doubt, first in line first
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
	get  bool     // a GET: it may be a probe, and be cut
	rank readRank // its system's rank when it began waiting
	c    *Controller
}

// readRank is a system's rank among those whose reads wait or hold a
// place: a system not in doubt above every system in doubt; among
// these, the one that missed fewer reads since its last answer, then the
// one answered last.
type readRank struct {
	doubt  bool
	missed int64
	last   int64 // its last answer (UnixNano; 0: never)
}

// rank returns c's rank now.
func (c *Controller) rank() readRank {
	if !c.doubt.Load() && !c.suspect.Load() {
		return readRank{}
	}
	return readRank{doubt: true, missed: c.missed.Load(), last: c.lastAnswer.Load()}
}

// above reports whether a ranks above b (systems not in doubt rank
// alike: they wait in line).
func (a readRank) above(b readRank) bool {
	switch {
	case a.doubt != b.doubt:
		return !a.doubt
	case !a.doubt:
		return false
	case a.missed != b.missed:
		return a.missed < b.missed
	}
	return a.last > b.last
}

// mayCut reports whether a waiting read of rank w may cut t, a read of a
// system in doubt: w ranks above t's system, and w's system is not in
// doubt or was answered later than t's (so two systems in doubt never
// cut each other's reads in turn: their answers, which end a doubt, fix
// which may cut which).
func (w readRank) mayCut(t *readTicket) bool {
	return t.ready && !t.back && t.get && !t.cut && t.c.inDoubt() &&
		w.above(t.c.rank()) && (!w.doubt || w.last > t.c.lastAnswer.Load())
}

// inDoubt reports whether c is doubtful or suspect.
func (c *Controller) inDoubt() bool { return c.doubt.Load() || c.suspect.Load() }

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
	ready   bool // sent: start and abort are set
	back    bool // its request returned (its answer's body may be read still)
	held    bool // it holds its place
	late    bool // its overdue time passed
	cut     bool // it was cut
	madeWay bool // it was cut to make way for a higher-ranked read of a system (not for a probe)
	missed  bool // the evidence showed it hangs (its read is missed)
}

// grantLocked hands free places to waiting reads and cuts the reads that
// must make way: the MaxInFlight places to the reads of systems not in
// doubt, in line, cutting a read of a system in doubt for the first of
// them (preemptLocked); a free extra place to a probe while one is
// wanted, else to the highest-ranked read of a system in doubt; the
// MaxInFlight places left free to doubtful systems' reads
// (guestLocked); and it cuts the extra place's read for a probe
// once overdue, or for a higher-ranked read of a system in doubt
// (extraCutLocked).
func (p *readPlaces) grantLocked() {
	for p.held < p.max && p.waiting.Len() > 0 {
		p.give(p.waiting.Front().Value.(*readWaiter), placeRead)
	}
	p.preemptLocked()
	wanted := p.probeWantedLocked()
	if p.extra == nil {
		if wanted {
			for e := p.waiting.Back(); e != nil; e = e.Prev() { // the last in line that may probe
				if w := e.Value.(*readWaiter); w.get {
					p.give(w, placeProbe)
					break
				}
			}
		} else if w := bestLocked(&p.suspects, &p.doubts); w != nil {
			p.give(w, placeDoubt)
		}
	}
	for p.held < p.max {
		w := p.guestLocked()
		if w == nil {
			break
		}
		p.give(w, placeRead)
	}
	p.extraCutLocked(wanted)
}

// guestLocked returns the highest-ranked waiting read of a doubtful
// system that may take a free MaxInFlight place (nil: none): one whose
// system does not rank above the extra place's (a probe's, or a
// lower-ranked system's read: that one waits for the extra place, which
// it takes when that read ends, and keeps).
func (p *readPlaces) guestLocked() *readWaiter {
	var best *readWaiter
	for e := p.doubts.Front(); e != nil; e = e.Next() {
		w := e.Value.(*readWaiter)
		if t := p.extra; t == nil || t.kind == placeDoubt && w.rank.above(t.c.rank()) {
			continue
		}
		if best == nil || w.rank.above(best.rank) {
			best = w
		}
	}
	return best
}

// extraCutLocked cuts the extra place's read (a GET) for a probe while
// one is wanted, once overdue; else, if it is a read of a system in
// doubt, for the highest-ranked waiting read of a system in doubt if that
// may cut it (mayCut) (p.mu held).
func (p *readPlaces) extraCutLocked(wanted bool) {
	t := p.extra
	if t == nil || t.cut || t.back || !t.get {
		return
	}
	switch {
	case wanted:
		if !t.late {
			return
		}
		// Not made way: overdue, it was left unanswered at the BMC
		// for four times the usual answer time, which counts towards
		// a miss.
	case t.kind != placeDoubt:
		return
	default:
		if w := bestLocked(&p.suspects, &p.doubts); w == nil || !w.rank.mayCut(t) {
			return
		}
		t.madeWay = true
	}
	t.cut = true
	t.abort()
}

// bestLocked returns the highest-ranked waiter of a and b (b may be
// nil), first in line of its rank (nil: none).
func bestLocked(a, b *list.List) *readWaiter {
	var best *readWaiter
	for _, l := range []*list.List{a, b} {
		if l == nil {
			continue
		}
		for e := l.Front(); e != nil; e = e.Next() {
			if w := e.Value.(*readWaiter); best == nil || w.rank.above(best.rank) {
				best = w
			}
		}
	}
	return best
}

// preemptLocked cuts, for the first waiting read of a system not in
// doubt while every MaxInFlight place is held, the lowest-ranked read of
// a system in doubt holding one (a GET), unless a cut is under way
// already: its place goes to that waiting read once the cut request
// returned.
func (p *readPlaces) preemptLocked() {
	if p.waiting.Len() == 0 || p.held < p.max {
		return
	}
	var low *readTicket
	for _, t := range p.reads {
		if t.cut {
			return // its place goes to the waiting read once its request returned
		}
		if (readRank{}).mayCut(t) && (low == nil || low.c.rank().above(t.c.rank())) {
			low = t
		}
	}
	if low != nil {
		low.cut, low.madeWay = true, true
		low.abort()
	}
}

// probeWantedLocked: a read of a system not in doubt waits while every
// MaxInFlight place is held by an overdue read that no waiting read may
// cut.
func (p *readPlaces) probeWantedLocked() bool {
	if p.waiting.Len() == 0 || p.held < p.max || len(p.overdue) < p.held {
		return false
	}
	for _, t := range p.reads {
		if t.cut || (readRank{}).mayCut(t) {
			return false // its place goes to a waiting read
		}
	}
	return true
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
// until the cut request returned, its read is missed and waits again.
// Not a read of a system in doubt (it is in doubt already: it keeps the
// extra place until it ends, and a MaxInFlight place until a read of a
// system not in doubt waits), nor a read other than a GET (it is not
// sent again: it keeps its place).
func (p *readPlaces) proveLocked(t *readTicket, now time.Time) {
	if t.kind == placeDoubt || t.c.inDoubt() || !t.get || t.cut || !p.provesLocked(t, now) {
		return
	}
	t.cut = true
	t.abort()
	if t.proof {
		t.missed = true
		t.c.fallInDoubt(true)
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
// whether t was cut before its answer (its read waits again), whether to
// make way for a higher-ranked read, and whether the evidence showed it
// hangs (its read is missed).
func (t *readTicket) end(answered bool, d time.Duration) (cut, madeWay, missed bool) {
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
	return cut, cut && t.madeWay, t.missed
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
	atBMC   time.Duration // time its attempts spent at the BMC (but those cut to make way)
	doubtAt time.Duration // its first attempt's doubtAfter
	tries   int
	cut     bool // its last attempt was cut
	madeWay bool // its last attempt was cut to make way for a higher-ranked read
	missed  bool // the evidence showed it hangs: its system missed it already
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
			r.settle(false, 0)
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
	var missed bool
	r.cut, r.madeWay, missed = t.end(answered, d)
	r.missed = r.missed || missed
	if !r.madeWay { // an attempt cut to make way proves nothing of the BMC
		r.atBMC += d
	}
	if r.cut && r.ctx.Err() == nil {
		r.t = nil
		t.free()
		return true
	}
	r.settle(answered, d)
	return false
}

// settle records the end of the read, whose last attempt took d (an
// answer: answered): an answer clears its system's doubt; a read the BMC
// left unanswered for doubtAt (doubtAfter when it began) in all is
// missed, unless the evidence counted it already or its last attempt
// was cut to make way for a higher-ranked read (a wait for a place is
// not the BMC's silence). A caller that gives up sooner proves nothing.
func (r *readPlace) settle(answered bool, d time.Duration) {
	switch {
	case answered:
		r.c.answeredRead(d)
	case r.missed || r.madeWay:
	case r.doubtAt > 0 && r.atBMC >= r.doubtAt:
		r.c.fallInDoubt(false)
	}
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

// answeredRead records that a read of c's was answered after d: c is no
// longer in doubt, and d counts towards the session's answer time.
func (c *Controller) answeredRead(d time.Duration) {
	c.lastAnswer.Store(time.Now().UnixNano())
	c.lastTook.Store(int64(d))
	c.missed.Store(0)
	c.suspect.Store(false)
	c.doubt.Store(false)
	c.sess.answered(d)
}

// fallInDoubt records that c missed a read: c is in doubt (suspect if
// the evidence showed the read hangs, else doubtful).
func (c *Controller) fallInDoubt(suspect bool) {
	c.missed.Add(1)
	if suspect {
		c.suspect.Store(true)
	} else {
		c.doubt.Store(true)
	}
}
