package power

import (
	"container/heap"
	"time"
)

// The retries of hosts whose system failed (entry.missing) are at most one
// per LoginInterval per BMC (endpoint.lastProbe). That one retry is a turn
// among the hosts that ask for it: it goes to the one that had it longest
// ago (never first), not to whoever calls first once the interval is over;
// dead blades polled every second would otherwise take every turn, and a
// repaired blade polled less often never get one
// (TestReview35_RepairedBladeStarvedByDeadNeighbours). A host waiting
// holds the turn back for as long as it keeps asking at its own pace: for
// the longest pause between its asks plus LoginInterval (at most
// MaxBackoff plus LoginInterval) after its last ask; a repaired blade
// asked every 2 minutes (a health check) then gets the next turn when it
// asks again, not the dead blades polled every second
// (TestReview35_RepairedBladePolledSlowlyStarves). A host that asked no
// more for that long no longer waits: it holds no turn back.

// turnLocked notes that missing host e asks for the retry turn of its BMC
// at now, and reports whether it has it (p.mu held): the interval since
// the last such retry is over, and no other host asking (within
// LoginInterval) had the turn longer ago. The caller that takes it calls
// tookTurnLocked.
func (p *Pool) turnLocked(e *entry, now time.Time) bool {
	ep := e.cr.ep
	if gap := now.Sub(e.askedAt); e.askedAt.IsZero() || gap < 0 {
		e.askGap = 0
	} else if e.turnIdx == 0 || gap > e.askGap {
		e.askGap = gap // since its last ask (before it queued: its pace)
	}
	e.askedAt = now
	if e.turnIdx == 0 {
		e.turnSeq = ep.turnSeq
		ep.turnSeq++
		heap.Push(&ep.turns, e)
	}
	if !ep.lastProbe.IsZero() && now.Sub(ep.lastProbe) < p.cfg.LoginInterval {
		return false
	}
	for {
		h := ep.turns[0] // e is queued
		if h == e {
			return true
		}
		if now.Sub(h.askedAt) < p.askHold(h) {
			return false // h still asks, and had the turn longer ago
		}
		heap.Pop(&ep.turns) // h asks no more
	}
}

// askHold is how long after its last ask waiting host h still holds the
// turn back: the longest pause between its asks plus LoginInterval, at
// most MaxBackoff plus LoginInterval.
func (p *Pool) askHold(h *entry) time.Duration {
	return min(h.askGap, p.cfg.MaxBackoff) + p.cfg.LoginInterval
}

// tookTurnLocked records that missing host e retries now, on its BMC's
// turn (p.mu held).
func (p *Pool) tookTurnLocked(e *entry, now time.Time) {
	e.cr.ep.lastProbe = now
	e.turnAt = now
	p.leaveTurnsLocked(e)
}

// leaveTurnsLocked takes e off its BMC's retry turns, if it waits there
// (p.mu held).
func (p *Pool) leaveTurnsLocked(e *entry) {
	if e.turnIdx != 0 {
		heap.Remove(&e.cr.ep.turns, e.turnIdx-1)
	}
}

// turnHeap is a BMC's hosts waiting for the retry turn, the one that had
// it longest ago (never first) first, then in the order they asked
// (container/heap).
type turnHeap []*entry

func (h turnHeap) Len() int { return len(h) }

func (h turnHeap) Less(i, j int) bool {
	if !h[i].turnAt.Equal(h[j].turnAt) {
		return h[i].turnAt.Before(h[j].turnAt)
	}
	return h[i].turnSeq < h[j].turnSeq
}

func (h turnHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].turnIdx, h[j].turnIdx = i+1, j+1
}

func (h *turnHeap) Push(x any) {
	e := x.(*entry)
	e.turnIdx = len(*h) + 1
	*h = append(*h, e)
}

func (h *turnHeap) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n]
	old[n] = nil
	e.turnIdx = 0
	*h = old[:n]
	if n == 0 {
		*h = nil // let the array go
	}
	return e
}
