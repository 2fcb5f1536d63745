package power

import (
	"container/heap"
	"time"
)

// Turns. Two things the Pool allows one host at a time, a pause apart,
// are turns among the hosts asking for them: the retry of a host whose
// system failed (at most one per LoginInterval per BMC: endpoint.retry,
// entry.retry) and the read of a host held on credentials the BMC
// leaves unanswered (one per pause per login: creds.held, entry.held,
// heldReadLocked). A turn goes to the host that had it longest ago
// (never first), not to whoever calls first once the pause is over; dead
// blades polled every second would otherwise take every turn, and a
// repaired or healthy blade polled less often never get one
// (TestReview35_RepairedBladeStarvedByDeadNeighbours,
// TestReview35aa_BasicAuthDeadNeighbourHoldsHealthyReadsForEver). A host
// waiting holds the turn back for as long as it keeps asking at its own
// pace: for the longest pause between its asks plus LoginInterval (at
// most MaxBackoff plus LoginInterval) after its last ask; a repaired
// blade asked every 2 minutes (a health check) then gets the next turn
// when it asks again, not the dead blades polled every second
// (TestReview35_RepairedBladePolledSlowlyStarves). A host that asked no
// more for that long no longer waits: it holds no turn back.

// turn is one host's place among the hosts asking for one kind of turn.
type turn struct {
	e       *entry
	at      time.Time     // when it last had the turn (zero: never)
	askedAt time.Time     // its last ask
	askGap  time.Duration // the longest pause between its asks while it waits
	seq     uint64        // its order among the hosts asking
	idx     int           // its index in the queue plus one (0: not waiting)
}

// turnQueue is the hosts waiting for one turn, the one that had it
// longest ago (never first) first, then in the order they asked.
type turnQueue struct {
	h   turnHeap
	seq uint64 // hosts queued so far (their order)
}

// askTurnLocked notes that t's host asks for q's turn at now, and
// reports whether it is first among the hosts still asking (p.mu held):
// no other host asking had the turn longer ago. The caller that takes
// the turn calls tookTurnLocked.
func (p *Pool) askTurnLocked(q *turnQueue, t *turn, now time.Time) bool {
	if gap := now.Sub(t.askedAt); t.askedAt.IsZero() || gap < 0 {
		t.askGap = 0
	} else if t.idx == 0 || gap > t.askGap {
		t.askGap = gap // since its last ask (before it queued: its pace)
	}
	t.askedAt = now
	if t.idx == 0 {
		t.seq = q.seq
		q.seq++
		heap.Push(&q.h, t)
	}
	for {
		h := q.h[0] // t is queued
		if h == t {
			return true
		}
		if now.Sub(h.askedAt) < p.askHold(h) {
			return false // h still asks, and had the turn longer ago
		}
		heap.Pop(&q.h) // h asks no more
	}
}

// askHold is how long after its last ask waiting host h still holds the
// turn back: the longest pause between its asks plus LoginInterval, at
// most MaxBackoff plus LoginInterval.
func (p *Pool) askHold(h *turn) time.Duration {
	return min(h.askGap, p.cfg.MaxBackoff) + p.cfg.LoginInterval
}

// tookTurnLocked records that t's host takes q's turn now (p.mu held).
func tookTurnLocked(q *turnQueue, t *turn, now time.Time) {
	t.at = now
	leaveTurnLocked(q, t)
}

// leaveTurnLocked takes t's host off q, if it waits there (p.mu held).
func leaveTurnLocked(q *turnQueue, t *turn) {
	if t.idx != 0 {
		heap.Remove(&q.h, t.idx-1)
	}
}

// clearTurnsLocked takes every host off q (p.mu held): none waits any
// more. The turns they had are kept (turn.at).
func clearTurnsLocked(q *turnQueue) {
	for _, t := range q.h {
		t.idx = 0
	}
	q.h = nil
}

// turnLocked notes that missing host e asks for the retry turn of its BMC
// at now, and reports whether it has it (p.mu held): the interval since
// the last such retry is over, and no other host asking (within
// askHold) had the turn longer ago. The caller that takes it calls
// tookRetryLocked.
func (p *Pool) turnLocked(e *entry, now time.Time) bool {
	ep := e.cr.ep
	first := p.askTurnLocked(&ep.retry, &e.retry, now)
	return first && (ep.lastProbe.IsZero() || now.Sub(ep.lastProbe) >= p.cfg.LoginInterval)
}

// tookRetryLocked records that missing host e retries now, on its BMC's
// turn (p.mu held).
func (p *Pool) tookRetryLocked(e *entry, now time.Time) {
	e.cr.ep.lastProbe = now
	tookTurnLocked(&e.cr.ep.retry, &e.retry, now)
}

// leaveTurnsLocked takes e off its BMC's retry turns, if it waits there
// (p.mu held).
func (p *Pool) leaveTurnsLocked(e *entry) {
	leaveTurnLocked(&e.cr.ep.retry, &e.retry)
}

// turnHeap is a queue's hosts (container/heap).
type turnHeap []*turn

func (h turnHeap) Len() int { return len(h) }

func (h turnHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}

func (h turnHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i+1, j+1
}

func (h *turnHeap) Push(x any) {
	t := x.(*turn)
	t.idx = len(*h) + 1
	*h = append(*h, t)
}

func (h *turnHeap) Pop() any {
	old := *h
	n := len(old) - 1
	t := old[n]
	old[n] = nil
	t.idx = 0
	*h = old[:n]
	if n == 0 {
		*h = nil // let the array go
	}
	return t
}
