package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// The index of unfinished plans: a key PREFIX unfinished/UUID (empty) for
// every plan that may still reboot servers, put by the transaction that
// creates the plan and deleted by the write that ends it (the same
// compare-and-swap as the header), so that Unfinished, a pass and
// Create's check of the other plans read the unfinished plans only, never
// the retained ended ones. PREFIX unfinished (the marker) says the index
// is complete: a prefix written by a version without the index has
// unfinished plans and no marker, and the first Unfinished builds the
// index from the headers.
func (s *Store) indexPrefix() string         { return s.prefix + "unfinished/" }
func (s *Store) indexKey(uuid string) string { return s.indexPrefix() + uuid }
func (s *Store) indexMarker() string         { return s.prefix + "unfinished" }

// indexOps are the operations a write of header h over old adds to keep
// the index: none unless the plan ends (or starts again: a write of a
// plan that ended, after the check of the other plans resumeCheck makes).
func (s *Store) indexOps(uuid string, old, h header) []clientv3.Op {
	switch {
	case ended(h) && !ended(old):
		return []clientv3.Op{clientv3.OpDelete(s.indexKey(uuid))}
	case !ended(h) && ended(old):
		return []clientv3.Op{clientv3.OpPut(s.indexKey(uuid), "")}
	}
	return nil
}

// headState is what a read of a plan's header key (keys only) and token
// says: its ModRevision (0: no header) and the token of its last write.
type headState struct {
	rev int64
	tok string
}

// unfinishedAt returns the UUIDs in the index of unfinished plans and the
// revision read at, building the index first if the prefix has none. It
// reads at that revision the ModRevision (not the value) of the header
// and the token of every plan this store knows (knownHead) that the index
// names, and returns them by UUID: the first ones in the same transaction
// as the index, the rest in as many more as they need. A plan this store
// knows that the index does not name ended (another writer ended it, or
// pruned it): its caches are evicted (forget), whichever of them holds it
// (its header, member map, pages read whole or of the last view).
func (s *Store) unfinishedAt(ctx context.Context) ([]string, map[string]headState, int64, error) {
	s.cache.mu.Lock()
	knownUUIDs := slices.Sorted(maps.Keys(s.cache.known))
	cached := s.cachedLocked()
	s.cache.mu.Unlock()
	stateOps := func(uuids []string, opts ...clientv3.OpOption) []clientv3.Op {
		var ops []clientv3.Op
		for _, uuid := range uuids {
			ops = append(ops, clientv3.OpGet(s.headerKey(uuid), append([]clientv3.OpOption{clientv3.WithKeysOnly()}, opts...)...),
				clientv3.OpGet(s.tokenKey(uuid), opts...))
		}
		return ops
	}
	states := func(into map[string]headState, uuids []string, rs []*etcdserverpb.ResponseOp) {
		for i, uuid := range uuids {
			var st headState // no header
			if kvs := rs[2*i].GetResponseRange().Kvs; len(kvs) > 0 {
				st.rev = kvs[0].ModRevision
			}
			st.tok = tokenOf((*clientv3.GetResponse)(rs[2*i+1].GetResponseRange()))
			into[uuid] = st
		}
	}
	perTxn := maxTxnOps / 2
	first := knownUUIDs[:min(len(knownUUIDs), perTxn-1)]
	for try := 0; ; try++ {
		ops := append([]clientv3.Op{
			clientv3.OpGet(s.indexPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(s.indexMarker(), clientv3.WithKeysOnly()),
		}, stateOps(first)...)
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, nil, 0, fmt.Errorf("etcd: list: %w", err)
		}
		if len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
			at := resp.Header.Revision
			var out []string
			for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
				uuid := strings.TrimPrefix(string(kv.Key), s.indexPrefix())
				if plan.ValidUUID(uuid) == nil {
					out = append(out, uuid)
				}
			}
			sort.Strings(out)
			mods := make(map[string]headState, len(knownUUIDs))
			states(mods, first, resp.Responses[2:])
			var rest []string
			for _, uuid := range cached {
				if _, in := slices.BinarySearch(out, uuid); !in {
					s.forget(uuid)
					delete(mods, uuid)
				}
			}
			for _, uuid := range knownUUIDs {
				if _, in := slices.BinarySearch(out, uuid); !in {
					continue
				}
				if _, read := mods[uuid]; !read {
					rest = append(rest, uuid)
				}
			}
			for start := 0; start < len(rest); start += perTxn {
				batch := rest[start:min(start+perTxn, len(rest))]
				r, err := s.cli.Txn(ctx).Then(stateOps(batch, clientv3.WithRev(at))...).Commit()
				if err != nil {
					return nil, nil, 0, fmt.Errorf("etcd: list: %w", err)
				}
				states(mods, batch, r.Responses)
			}
			return out, mods, at, nil
		}
		if try >= readRetries {
			return nil, nil, 0, fmt.Errorf("etcd: building the index of unfinished plans: %w", plan.ErrConflict)
		}
		if err := s.buildIndex(ctx); err != nil {
			return nil, nil, 0, err
		}
	}
}

// buildIndex writes the index of unfinished plans from every header (once
// per prefix written by a version without the index), after reading
// every header and token at one revision. Each transaction writes the
// index keys of a batch of headers and compares those headers (their
// revision and the token of their write, token.go) and the guard: a plan
// written meanwhile makes it start again, and a deposed leader writes
// nothing (ErrNotLeader). A plan written after its batch keeps its key
// right (the write that ends it deletes it). With more than one batch,
// each also compares and rewrites a build key (PREFIX unfinished-build,
// random), and the marker goes with the last: a batch undone by a restore
// of etcd from a backup makes the next fail, and the build start again.
func (s *Store) buildIndex(ctx context.Context) error {
	var (
		kvs []*mvccpb.KeyValue
		tok map[string]string
	)
	err := retryCompacted(func() error {
		// Two reads at one revision, not one transaction.
		resp, err := s.cli.Get(ctx, s.headersPrefix(), clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("etcd: list: %w", err)
		}
		toks, err := s.cli.Get(ctx, s.tokenPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision))
		if err != nil {
			return fmt.Errorf("etcd: list: %w", err)
		}
		kvs, tok = resp.Kvs, make(map[string]string, len(toks.Kvs))
		for _, kv := range toks.Kvs {
			tok[strings.TrimPrefix(string(kv.Key), s.tokenPrefix())] = heldToken(string(kv.Value))
		}
		return nil
	})
	if err != nil {
		return err
	}
	perTxn := (maxTxnOps - 2 - len(s.guard)) / 2
	buildKey := s.indexMarker() + "-build"
	built := "" // the build key as the last batch wrote it (held)
	for start := 0; start == 0 || start < len(kvs); start += perTxn {
		batch := kvs[start:min(start+perTxn, len(kvs))]
		last := start+perTxn >= len(kvs)
		cmps := slices.Clone(s.guard)
		var ops []clientv3.Op
		for _, kv := range batch {
			uuid := strings.TrimPrefix(string(kv.Key), s.headersPrefix())
			cmps = append(cmps, s.sameHeader(uuid, kv.ModRevision, tok[uuid])...)
			// Unreadable: indexed, so that Unfinished reports it.
			if h, err := decodeHeader(uuid, kv.Value); err != nil || !ended(h) {
				ops = append(ops, clientv3.OpPut(s.indexKey(uuid), ""))
			}
		}
		if start > 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(buildKey), "=", built[1:]))
		}
		switch {
		case last && start > 0:
			ops = append(ops, clientv3.OpPut(s.indexMarker(), ""), clientv3.OpDelete(buildKey))
		case last:
			ops = append(ops, clientv3.OpPut(s.indexMarker(), ""))
		default:
			v := newToken()
			ops, built = append(ops, clientv3.OpPut(buildKey, v)), heldToken(v)
		}
		r, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("etcd: building the index of unfinished plans: %w", err)
		}
		if !r.Succeeded {
			if err := s.notLeader(ctx); err != nil {
				return fmt.Errorf("etcd: building the index of unfinished plans: %w", err)
			}
			return nil // a plan was written meanwhile: read again
		}
	}
	return nil
}

// indexedHead is the header of a plan the index names, as read.
type indexedHead struct {
	uuid string
	h    header
	rev  int64 // the header's ModRevision
}

// unfinishedHeads reads the headers of the plans the index names, at the
// revision the index was read at, and returns those of unfinished plans,
// that revision, and the headers that cannot be read (corrupt). It reads
// nothing of the ended plans, and neither fetches nor decodes a header
// this store knows at the version read (knownHead).
func (s *Store) unfinishedHeads(ctx context.Context) (out []indexedHead, at int64, corrupt []string, err error) {
	err = retryCompacted(func() error {
		out, corrupt = nil, nil
		uuids, mods, rev, err := s.unfinishedAt(ctx)
		if err != nil {
			return err
		}
		at = rev
		heads := make(map[string]indexedHead, len(uuids))
		var fetch []string
		for _, uuid := range uuids {
			if k, ok := s.known(uuid); ok && mods[uuid] == (headState{rev: k.rev, tok: k.h.tok}) {
				heads[uuid] = indexedHead{uuid: uuid, h: k.h, rev: k.rev}
			} else {
				fetch = append(fetch, uuid)
			}
		}
		for start := 0; start < len(fetch); start += maxTxnOps / 2 {
			batch := fetch[start:min(start+maxTxnOps/2, len(fetch))]
			ops := make([]clientv3.Op, 0, 2*len(batch))
			for _, uuid := range batch {
				ops = append(ops, clientv3.OpGet(s.headerKey(uuid), clientv3.WithRev(at)), clientv3.OpGet(s.tokenKey(uuid), clientv3.WithRev(at)))
			}
			resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return fmt.Errorf("etcd: list: %w", err)
			}
			for i := range batch {
				kvs := resp.Responses[2*i].GetResponseRange().Kvs
				if len(kvs) == 0 {
					continue // pruned
				}
				h, err := decodeHeader(batch[i], kvs[0].Value)
				if err != nil {
					corrupt = append(corrupt, err.Error())
					continue
				}
				h.tok = tokenOf((*clientv3.GetResponse)(resp.Responses[2*i+1].GetResponseRange()))
				s.remember(batch[i], knownHead{rev: kvs[0].ModRevision, h: h, raw: kvs[0].Value})
				heads[batch[i]] = indexedHead{uuid: batch[i], h: h, rev: kvs[0].ModRevision}
			}
		}
		for _, uuid := range uuids {
			if ih, ok := heads[uuid]; ok && !ended(ih.h) {
				out = append(out, ih)
			}
		}
		return nil
	})
	return out, at, corrupt, err
}
