package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// knownHead is a plan's header as this store last read it or its pass
// wrote it (PutView): h, stored as raw, at version rev (the header key's
// ModRevision), written with token h.tok (token.go). Every write of the
// plan rewrites its header and its token, so while the key's ModRevision
// is still rev and the token still h.tok nothing of the plan changed and h
// is what is stored (the revision alone is not enough: etcd restored from
// a copy of its data directory gives revisions again). A read of the
// header then compares both in etcd (one small read-only transaction)
// instead of fetching and decoding the value again. The header of a plan
// with thousands of reboots in flight is tens of KB whose decoding took
// more than a millisecond, and a pass reads it before every recheckEvery
// jobs (plan.Executor.Pass). Only unfinished plans are kept (forget evicts
// a plan that ends). h is shared: never modified (readHeaderValue gives
// callers their own copy).
type knownHead struct {
	rev int64
	h   header
	raw []byte
}

// known returns the header this store knows for uuid.
func (s *Store) known(uuid string) (knownHead, bool) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	k, ok := s.cache.known[uuid]
	return k, ok
}

// remember records k as the header of uuid, if the plan may act again.
// The last one read or written is kept, whatever its revision (after a
// restore of etcd, a lower revision is the current one): an entry that is
// not current any more only costs a read, as every use of it compares its
// revision and token. At most maxKnown plans are kept: a plan beyond
// them is read whole every time (Unfinished evicts the plans that ended).
func (s *Store) remember(uuid string, k knownHead) {
	if ended(k.h) {
		return
	}
	s.cache.mu.Lock()
	if _, ok := s.cache.known[uuid]; ok || len(s.cache.known) < maxKnown {
		s.cache.known[uuid] = k
	}
	s.cache.mu.Unlock()
}

// maxKnown bounds the headers a store keeps (knownHead): the unfinished
// plans of a prefix are a few, and a header is tens of KB at most.
const maxKnown = 1024

// headerAt reads the header of uuid and returns it (shared: not to be
// modified) with the revision read at (read its pages at that one). With
// ops, they are run in the same read-only transaction when the header is
// the known one (its ModRevision and token unchanged), and their answers returned
// (hit is false when the header changed, or none was known: then it was
// fetched and decoded, and the ops were not run). A header it reads ended
// evicts every cache of the plan (forget).
func (s *Store) headerAt(ctx context.Context, uuid string, ops ...clientv3.Op) (k knownHead, at int64, hit bool, answers []*etcdserverpb.ResponseOp, err error) {
	if err := plan.ValidUUID(uuid); err != nil {
		return k, 0, false, nil, err
	}
	hk := s.headerKey(uuid)
	was, ok := s.known(uuid)
	read := []clientv3.Op{clientv3.OpGet(hk), clientv3.OpGet(s.tokenKey(uuid))}
	var resp *clientv3.TxnResponse
	if ok {
		resp, err = s.cli.Txn(ctx).If(s.sameHeader(uuid, was.rev, was.h.tok)...).Then(ops...).Else(read...).Commit()
	} else {
		resp, err = s.cli.Txn(ctx).Then(read...).Commit()
	}
	if err != nil {
		return k, 0, false, nil, fmt.Errorf("etcd: get %s: %w", uuid, err)
	}
	if ok && resp.Succeeded {
		return was, resp.Header.Revision, true, resp.Responses, nil
	}
	at = resp.Header.Revision
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return k, 0, false, nil, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	h, err := decodeHeader(uuid, kvs[0].Value)
	if err != nil {
		return k, 0, false, nil, err
	}
	h.tok = tokenOf((*clientv3.GetResponse)(resp.Responses[1].GetResponseRange()))
	k = knownHead{rev: kvs[0].ModRevision, h: h, raw: kvs[0].Value}
	if ended(h) {
		// Nothing of a plan that ended is kept (it may have ended
		// elsewhere): whichever read of its header saw it (GetState,
		// GetHead, Get, GetView, a write's read).
		s.forget(uuid)
	} else {
		s.remember(uuid, k)
	}
	return k, at, false, nil, nil
}

// clone returns a copy of h that shares no memory a caller may modify
// with h: the plan's commands, creation time and policy (ownPlan), the
// index's positions and histogram, the overlays.
func (h header) clone() header {
	c := h
	c.Plan = ownPlan(h.Plan)
	c.Index.InFlight = slices.Clone(h.Index.InFlight)
	c.Index.DoneHist = maps.Clone(h.Index.DoneHist)
	c.Over = maps.Clone(h.Over)
	if h.Ended != nil {
		t := *h.Ended
		c.Ended = &t
	}
	return c
}

// ownPlan is p.Clone() that also copies what p's policy points to (the
// conditions and their commands, the ramp, the domain limits, the windows),
// which plan.Plan.Clone shares by design: a plan served from a header this
// store keeps (knownHead) or kept from a caller's plan shares no memory
// with it. The policy is small: a few slices of a few entries.
func ownPlan(p plan.Plan) plan.Plan {
	q := p.Clone()
	q.Ramp = slices.Clone(p.Ramp)
	q.DomainLimits = slices.Clone(p.DomainLimits)
	if p.Conditions != nil {
		q.Conditions = make([]plan.Condition, len(p.Conditions))
		for i, c := range p.Conditions {
			c.Command = slices.Clone(c.Command)
			q.Conditions[i] = c
		}
	}
	if p.Windows != nil {
		w := *p.Windows
		w.Weekly, w.Ranges = slices.Clone(w.Weekly), slices.Clone(w.Ranges)
		q.Windows = &w
	}
	return q
}

// wallOnlyHeader strips the monotonic clock readings of the times h
// points to (h owns them), as wallOnly does for pages: a header a store
// keeps after writing it holds the times as a read of it would.
func wallOnlyHeader(h *header) {
	ts := []*time.Time{h.Plan.CreatedAt, h.Ended}
	for _, t := range ts {
		if t != nil {
			*t = t.Round(0)
		}
	}
	for i := range h.Plan.Commands {
		h.Plan.Commands[i].At = h.Plan.Commands[i].At.Round(0)
	}
}
