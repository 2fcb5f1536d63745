package redfish

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Read places (Config.MaxInFlight). A read takes one of the session's
// places for as long as the BMC takes to answer it, but no longer than
// overdueAfter: a read still unanswered then (a dead blade's, which hangs
// until its caller's deadline) gives its place up to the reads waiting
// behind it; once it ends unanswered, after twice its overdue time or
// more, its system is suspect (a caller that gave up sooner proves
// nothing). A suspect system's reads then
// share one place of their own, beside the session's places, until one
// of its reads is answered: dead blades polled by a monitor hold at most
// that one place together, never the places of the healthy blades' reads
// on the same session (TestReview35v_DeadBladesReadsStarveHealthyReads).
// In flight at once on a session: MaxInFlight reads, the suspect
// systems' one, and the reads that have gone overdue (at most one per
// system, each system's requests being sent one at a time). A slow BMC's
// first late answer raises the overdue time (answered): its reads then
// keep their places. The bound is not MaxInFlight + 1: before any late
// answer, a slow BMC and dead blades look alike (reads unanswered past
// the usual time), and dead blades' first reads must give their places
// up within the overdue time (TestReview35v_DeadBladesReadsStarveHealthyReads).

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
	avg     atomic.Int64  // moving average of answered reads' durations (ns; 0: none yet)
	suspect chan struct{} // the one place the suspect systems' reads share
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
// overdue (the overdue time becomes twice d, at most lateRaiseMax): a
// merely slow BMC's reads stop giving their places up, and so stop
// passing MaxInFlight, from its first late answer on, not once the
// moving average has caught up (TestSlowBMCLateAnswerKeepsMaxInFlight).
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

// readPlace takes a read place on c's session for a request bound to ctx
// (none for a power command's, isCommand, or a session without a cap),
// waiting as long as ctx allows. done, called once the request returned
// (answered: the BMC sent an HTTP answer), gives it back.
func (c *Controller) readPlace(ctx context.Context) (done func(answered bool), err error) {
	s := c.sess
	if s.reads == nil || isCommand(ctx) {
		return func(bool) {}, nil
	}
	if c.suspect.Load() && s.stats.suspect != nil {
		select {
		case s.stats.suspect <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		start := time.Now()
		return func(answered bool) {
			<-s.stats.suspect
			c.settleRead(answered, time.Since(start))
		}, nil
	}
	select {
	case s.reads <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	free := func() { once.Do(func() { <-s.reads }) }
	start := time.Now()
	overdue := time.AfterFunc(s.overdueAfter(), free)
	return func(answered bool) {
		overdue.Stop()
		free()
		c.settleRead(answered, time.Since(start))
	}, nil
}

// suspectAfter: a read left unanswered (its caller gave up, or the
// connection failed) after this many times the overdue time marks its
// system suspect. A caller that gives up soon after its read went overdue
// (a health check's short deadline, a slow answer) proves no dead system:
// the suspicion stays as it was
// (TestReview35w_HealthyBladeSuspectStarvedByDeadBlades).
const suspectAfter = 2

// settleRead records the end of a read of c's that took d: an answer
// clears c's suspicion and counts towards the session's answer time; a
// read the BMC left unanswered for suspectAfter overdue times marks c
// suspect. Suspicion is decided here only, once the read ended (a
// system's requests are sent one at a time: only its next read looks at
// it), so an answer and an overdue timer never race to set it.
func (c *Controller) settleRead(answered bool, d time.Duration) {
	switch {
	case answered:
		c.suspect.Store(false)
		c.sess.answered(d)
	case d >= suspectAfter*c.sess.overdueAfter():
		c.suspect.Store(true)
	}
}
