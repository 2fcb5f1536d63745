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
// ModRevision). Every write of the plan rewrites its header, so while the
// key's ModRevision is still rev nothing of the plan changed and h is what
// is stored: a read of the header then compares the revision in etcd
// (one small read-only transaction) instead of fetching and decoding the
// value again. The header of a plan with thousands of reboots in flight
// is tens of KB whose decoding took more than a millisecond, and a pass
// reads it before every recheckEvery jobs (plan.Executor.Pass). Only
// unfinished plans are kept (forget evicts a plan that ends). h is shared:
// never modified (readHeaderValue gives callers their own copy).
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
func (s *Store) remember(uuid string, k knownHead) {
	if ended(k.h) {
		return
	}
	s.cache.mu.Lock()
	if was, ok := s.cache.known[uuid]; !ok || was.rev <= k.rev {
		s.cache.known[uuid] = k
	}
	s.cache.mu.Unlock()
}

// headerAt reads the header of uuid and returns it (shared: not to be
// modified) with the revision read at (read its pages at that one). With
// ops, they are run in the same read-only transaction when the header is
// the known one (its ModRevision unchanged), and their answers returned
// (hit is false when the header changed, or none was known: then it was
// fetched and decoded, and the ops were not run).
func (s *Store) headerAt(ctx context.Context, uuid string, ops ...clientv3.Op) (k knownHead, at int64, hit bool, answers []*etcdserverpb.ResponseOp, err error) {
	if err := plan.ValidUUID(uuid); err != nil {
		return k, 0, false, nil, err
	}
	hk := s.headerKey(uuid)
	was, ok := s.known(uuid)
	var kv *keyValue
	if ok {
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(hk), "=", was.rev)).Then(ops...).Else(clientv3.OpGet(hk)).Commit()
		if err != nil {
			return k, 0, false, nil, fmt.Errorf("etcd: get %s: %w", uuid, err)
		}
		if resp.Succeeded {
			return was, resp.Header.Revision, true, resp.Responses, nil
		}
		at = resp.Header.Revision
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			kv = &keyValue{value: kvs[0].Value, mod: kvs[0].ModRevision}
		}
	} else {
		resp, err := s.cli.Get(ctx, hk)
		if err != nil {
			return k, 0, false, nil, fmt.Errorf("etcd: get %s: %w", uuid, err)
		}
		at = resp.Header.Revision
		if len(resp.Kvs) > 0 {
			kv = &keyValue{value: resp.Kvs[0].Value, mod: resp.Kvs[0].ModRevision}
		}
	}
	if kv == nil {
		return k, 0, false, nil, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	h, err := decodeHeader(uuid, kv.value)
	if err != nil {
		return k, 0, false, nil, err
	}
	k = knownHead{rev: kv.mod, h: h, raw: kv.value}
	s.remember(uuid, k)
	return k, at, false, nil, nil
}

type keyValue struct {
	value []byte
	mod   int64
}

// clone returns a copy of h that shares no memory a caller may modify
// with h: the plan's commands and creation time, the index's positions and
// histogram, the overlays.
func (h header) clone() header {
	c := h
	c.Plan = h.Plan.Clone()
	c.Index.InFlight = slices.Clone(h.Index.InFlight)
	c.Index.DoneHist = maps.Clone(h.Index.DoneHist)
	c.Over = maps.Clone(h.Over)
	if h.Ended != nil {
		t := *h.Ended
		c.Ended = &t
	}
	return c
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
