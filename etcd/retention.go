package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// DefaultRetention is how long an Executor keeps a finished plan whole
// (its reboot records readable with Get) before Prune replaces it with
// its summary.
const DefaultRetention = 7 * 24 * time.Hour

// Archived is what remains of a plan Prune removed: its header (the plan
// without its reboots), the counts of its reboots, and when it ended and
// was pruned. It is stored under PREFIX summaries/UUID.
type Archived struct {
	Plan     plan.Plan    `json:"plan"`
	Summary  plan.Summary `json:"summary"`
	Ended    time.Time    `json:"ended"`
	PrunedAt time.Time    `json:"pruned_at"`
	// Request is the plan's Create request (its SHA-256): a Create of
	// the same plan retried after the prune succeeds without creating it
	// again; another plan of that UUID is refused (plan.ErrExists).
	Request string `json:"request,omitempty"`
}

func (s *Store) summaryKey(uuid string) string { return s.prefix + "summaries/" + uuid }

// ended reports whether header h is of a plan that will never act again:
// finished, nothing in flight.
func ended(h header) bool { return !(plan.View{Plan: h.Plan, Index: h.Index}).Unfinished() }

// forget evicts every cache the store keeps of a plan (its header, its
// members, the pages read whole and those of the last view): a plan that
// ended is read again only by a read of its header (GetState, GetHead,
// Get, GetView, a write's read) or of every header (List, Heads), which
// forget it again.
func (s *Store) forget(uuid string) { s.forgetAll([]string{uuid}) }

// forgetAll is forget of every plan of uuids, under one lock.
func (s *Store) forgetAll(uuids []string) {
	if len(uuids) == 0 {
		return
	}
	s.cache.mu.Lock()
	for _, uuid := range uuids {
		delete(s.cache.m, uuid)
		delete(s.cache.loaded, uuid)
		delete(s.cache.viewed, uuid)
		delete(s.cache.known, uuid)
		delete(s.cache.state, uuid)
	}
	s.cache.mu.Unlock()
}

// cachedLocked returns the UUIDs any cache of the store holds (sorted);
// s.cache.mu is held.
func (s *Store) cachedLocked() []string {
	set := make(map[string]bool, len(s.cache.known))
	for _, m := range []func(yield func(string) bool){maps.Keys(s.cache.m), maps.Keys(s.cache.loaded), maps.Keys(s.cache.viewed), maps.Keys(s.cache.known), maps.Keys(s.cache.state)} {
		for uuid := range m {
			set[uuid] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Prune replaces every plan that ended (finished, nothing in flight)
// before olderThan with its summary (Archived, under PREFIX summaries/),
// deleting its header and every page key under PREFIX pages/UUID/ (the
// reboot records, overlays and staged pages of failed writes included) in
// one transaction that compares the header's revision and the token of
// its write (token.go), read with it at one revision: a plan written
// meanwhile, even at the same revision after etcd was restored from a
// backup, is left for the next Prune. A plan's end is when Prune first
// saw it ended (it records that time in the header; a write that sets the
// plan unfinished again clears it), so a plan is kept
// whole for at least olderThan's distance from now after it ended. It
// returns the UUIDs pruned. Get and List do not see a pruned plan any
// more (plan.ErrNotFound); Summaries lists them.
func (s *Store) Prune(ctx context.Context, now, olderThan time.Time) ([]string, error) {
	heads, tok, _, err := s.listHeaders(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: prune: %w", err)
	}
	var pruned []string
	var errs []error
	for _, kv := range heads {
		uuid := strings.TrimPrefix(string(kv.Key), s.headersPrefix())
		h, err := decodeHeader(uuid, kv.Value)
		if err != nil || !ended(h) {
			continue // a corrupt header is left for a person to look at
		}
		s.forget(uuid)
		// The header's revision and the token of its write: after a
		// restore of etcd, another write can have the revision read.
		cas := append(s.sameHeader(uuid, kv.ModRevision, tok[uuid]), s.guard...)
		if h.Ended == nil {
			// First seen ended: record when (a write of the header: with
			// a new token).
			h.Ended = &now
			raw, err := json.Marshal(h)
			if err == nil {
				putTok, _ := s.putToken(uuid)
				_, err = s.cli.Txn(ctx).If(cas...).Then(clientv3.OpPut(string(kv.Key), string(raw)), putTok).Commit()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("etcd: prune %s: %w", uuid, err))
			}
			continue
		}
		if !h.Ended.Before(olderThan) {
			continue
		}
		a := Archived{Plan: h.Plan, Summary: plan.View{Plan: h.Plan, Index: h.Index}.Summary(), Ended: *h.Ended, PrunedAt: now, Request: h.Request}
		raw, err := json.Marshal(a)
		if err != nil {
			return pruned, err
		}
		r, err := s.cli.Txn(ctx).If(cas...).Then(
			clientv3.OpPut(s.summaryKey(uuid), string(raw)),
			clientv3.OpDelete(string(kv.Key)),
			clientv3.OpDelete(s.indexKey(uuid)),
			clientv3.OpDelete(s.tokenKey(uuid)),
			clientv3.OpDelete(s.prefix+"pages/"+uuid+"/", clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			errs = append(errs, fmt.Errorf("etcd: prune %s: %w", uuid, err))
			continue
		}
		if r.Succeeded {
			pruned = append(pruned, uuid)
		}
	}
	return pruned, errors.Join(errs...)
}

// Summaries returns what remains of the plans Prune removed.
func (s *Store) Summaries(ctx context.Context) ([]Archived, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"summaries/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: summaries: %w", err)
	}
	out := make([]Archived, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var a Archived
		if err := json.Unmarshal(kv.Value, &a); err != nil {
			return out, fmt.Errorf("%w: summary %s: %v", plan.ErrCorrupt, kv.Key, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Sweep deletes the page keys of plan uuid that its header does not name
// and that were written before it (so that no write in progress can still
// name them): the staged pages of a write that lost its compare-and-swap
// or whose writer died, and overlays a later write replaced. It returns
// how many keys it deleted. Every delete compares the header's revision
// and token as read (and the guard): a write that names a page key again
// between the read and the delete (a page put back under the plan's own
// key) makes Sweep read the header again and start over, at most
// sweepTries times; a failed guard deletes nothing (ErrNotLeader).
func (s *Store) Sweep(ctx context.Context, uuid string) (int, error) {
	deleted := 0
	for try := 0; try < sweepTries; try++ {
		n, done, err := s.sweepOnce(ctx, uuid)
		deleted += n
		if err != nil || done {
			return deleted, err
		}
		if err := s.refused(ctx, uuid, nil); err != nil {
			return deleted, err
		}
	}
	return deleted, nil // written meanwhile each time: the next Sweep tries again
}

// sweepTries is how many times Sweep reads the header again when a write
// lands between its read and its delete.
const sweepTries = 3

// sweepOnce is one try of Sweep: done is false when a compare failed.
func (s *Store) sweepOnce(ctx context.Context, uuid string) (int, bool, error) {
	h, version, at, err := s.readHeader(ctx, uuid)
	if err != nil {
		return 0, false, err
	}
	resp, err := s.cli.Get(ctx, s.prefix+"pages/"+uuid+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(at))
	if err != nil {
		return 0, false, fmt.Errorf("etcd: sweep %s: %w", uuid, err)
	}
	named := make(map[string]bool, pageCount(h.Count))
	for n := range pageCount(h.Count) {
		named[s.pageKeyOf(uuid, h, n)] = true
	}
	var stale []string
	for _, kv := range resp.Kvs {
		if !named[string(kv.Key)] && kv.ModRevision < version {
			stale = append(stale, string(kv.Key))
		}
	}
	n, done, err := s.deleteKeys(ctx, s.sameHeader(uuid, version, h.tok), stale)
	if err != nil {
		return n, false, fmt.Errorf("etcd: sweep %s: %w", uuid, err)
	}
	return n, done, nil
}

// SweepOrphans deletes the page keys of UUIDs that have no header, every
// one of whose keys under its nonce was written at or before revision
// before, the revision the previous call returned: the pages of a Create
// whose writer died before writing the header (or that lost it). Pass the
// revision the previous call returned (Maintain does, every ten minutes),
// so that a Create in progress keeps its pages; a Create slower than that
// finds its first page gone and fails. Each call rewrites a sweep key
// (PREFIX swept) in the transaction that reads, and returns its new
// revision; a call deletes nothing unless that key is still at before: a
// first call (before 0), and a call after etcd was restored from a copy
// of its data directory (revisions went back, and a page written since
// may have a revision at or below before), only mark. It reads the keys
// (not the values) of every page and header, and returns how many keys it
// deleted and the revision to pass next. With a guard that fails it
// neither reads nor deletes (ErrNotLeader).
func (s *Store) SweepOrphans(ctx context.Context, before int64) (int, int64, error) {
	pre := s.prefix + "pages/"
	sweepKey := s.prefix + "swept"
	resp, err := s.cli.Txn(ctx).If(s.guard...).Then(
		clientv3.OpGet(pre, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(s.headersPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(sweepKey, clientv3.WithKeysOnly()),
		clientv3.OpPut(sweepKey, newToken()),
	).Commit()
	if err != nil {
		return 0, 0, fmt.Errorf("etcd: sweep: %w", err)
	}
	if !resp.Succeeded {
		return 0, before, fmt.Errorf("etcd: sweep: %w", ErrNotLeader)
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].ModRevision != before {
		// The revision before is not of this history since the last
		// call (or there was none): mark only.
		before = 0
	}
	headed := map[string]bool{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		headed[strings.TrimPrefix(string(kv.Key), s.headersPrefix())] = true
	}
	// By UUID/NONCE/: the keys, and whether all are older than before.
	type group struct {
		keys int
		old  bool
	}
	groups := map[string]*group{}
	var order []string
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		parts := strings.SplitN(strings.TrimPrefix(string(kv.Key), pre), "/", 3)
		if len(parts) < 3 || headed[parts[0]] {
			continue
		}
		g := parts[0] + "/" + parts[1] + "/"
		if groups[g] == nil {
			groups[g] = &group{old: true}
			order = append(order, g)
		}
		groups[g].keys++
		groups[g].old = groups[g].old && kv.ModRevision <= before
	}
	deleted := 0
	var errs []error
	for _, g := range order {
		if !groups[g].old {
			continue
		}
		uuid := strings.SplitN(g, "/", 2)[0]
		// Only while the plan still has no header.
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.headerKey(uuid)), "=", 0)}, s.guard...)
		r, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(pre+g, clientv3.WithPrefix())).Commit()
		if err != nil {
			errs = append(errs, fmt.Errorf("etcd: sweep %s: %w", uuid, err))
			continue
		}
		if r.Succeeded {
			deleted += int(r.Responses[0].GetResponseDeleteRange().Deleted)
		}
	}
	return deleted, resp.Header.Revision, errors.Join(errs...)
}
