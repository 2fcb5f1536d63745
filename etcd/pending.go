package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

var _ plan.CommandStore = (*Store)(nil)

// stateRead is the header a pass last read the plan's state from
// (GetState, before its jobs: plan.Executor), and when that read or the
// last CommandPending comparison found it current.
type stateRead struct {
	rev  int64
	tok  string
	when time.Time
}

// pendingEvery is how long CommandPending trusts a comparison of the
// header: within it, it says no command is pending without asking etcd.
// A pass creating jobs back to back (thousands in a few milliseconds)
// then costs a comparison per pendingEvery, not one per job; a pass whose
// jobs take longer (a fleet's API call of tens of milliseconds or more)
// compares before every job.
const pendingEvery = 20 * time.Millisecond

// CommandPending implements plan.CommandStore: whether the plan's header
// changed (a Run, Stop or Cancel is a header write: plan.Command through
// PutHead, by any process) since the plan's state was last read through
// GetState, compared in etcd (the header key's ModRevision and its write
// token, one small read-only transaction) unless the last comparison is
// less than pendingEvery old. Any other write of the header (another
// writer's pass) counts too: the pass reads the state again, which costs
// one more small read. A plan whose state was never read here is pending.
func (s *Store) CommandPending(ctx context.Context, uuid string) (bool, error) {
	s.cache.mu.Lock()
	r, ok := s.cache.state[uuid]
	s.cache.mu.Unlock()
	if !ok {
		return true, nil
	}
	now := time.Now()
	if now.Sub(r.when) < pendingEvery {
		return false, nil
	}
	resp, err := s.cli.Txn(ctx).If(s.sameHeader(uuid, r.rev, r.tok)...).Commit()
	if err != nil {
		return false, fmt.Errorf("etcd: look for a command of plan %s: %w", uuid, err)
	}
	if !resp.Succeeded {
		return true, nil
	}
	s.cache.mu.Lock()
	if c, ok := s.cache.state[uuid]; ok && c.rev == r.rev && c.tok == r.tok && c.when.Before(now) {
		c.when = now
		s.cache.state[uuid] = c
	}
	s.cache.mu.Unlock()
	return false, nil
}

// sawState records that the plan's state was read from the header k.
func (s *Store) sawState(uuid string, k knownHead, when time.Time) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if ended(k.h) {
		delete(s.cache.state, uuid)
		return
	}
	if _, ok := s.cache.state[uuid]; ok || len(s.cache.state) < maxKnown {
		s.cache.state[uuid] = stateRead{rev: k.rev, tok: k.h.tok, when: when}
	}
}
