package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
}

func (s *Store) summaryKey(uuid string) string { return s.prefix + "summaries/" + uuid }

// ended reports whether header h is of a plan that will never act again:
// finished, nothing in flight.
func ended(h header) bool { return !(plan.View{Plan: h.Plan, Index: h.Index}).Unfinished() }

// forget evicts the store's caches of a plan (its members, the pages read
// last): a plan that ended is read again only by List and Get.
func (s *Store) forget(uuid string) {
	s.cache.mu.Lock()
	delete(s.cache.m, uuid)
	delete(s.cache.loaded, uuid)
	delete(s.cache.viewed, uuid)
	delete(s.cache.heads, uuid)
	s.cache.mu.Unlock()
}

// Prune replaces every plan that ended (finished, nothing in flight)
// before olderThan with its summary (Archived, under PREFIX summaries/),
// deleting its header and every page key under PREFIX pages/UUID/ (the
// reboot records, overlays and staged pages of failed writes included) in
// one transaction that compares the header's revision: a plan written
// meanwhile is left for the next Prune. A plan's end is when Prune first
// saw it ended (it records that time in the header), so a plan is kept
// whole for at least olderThan's distance from now after it ended. It
// returns the UUIDs pruned. Get and List do not see a pruned plan any
// more (plan.ErrNotFound); Summaries lists them.
func (s *Store) Prune(ctx context.Context, now, olderThan time.Time) ([]string, error) {
	resp, err := s.cli.Get(ctx, s.headersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: prune: %w", err)
	}
	var pruned []string
	var errs []error
	for _, kv := range resp.Kvs {
		uuid := strings.TrimPrefix(string(kv.Key), s.headersPrefix())
		h, err := decodeHeader(uuid, kv.Value)
		if err != nil || !ended(h) {
			continue // a corrupt header is left for a person to look at
		}
		s.forget(uuid)
		cas := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.headerKey(uuid)), "=", kv.ModRevision)}, s.guard...)
		if h.Ended == nil {
			// First seen ended: record when.
			h.Ended = &now
			raw, err := json.Marshal(h)
			if err == nil {
				_, err = s.cli.Txn(ctx).If(cas...).Then(clientv3.OpPut(string(kv.Key), string(raw))).Commit()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("etcd: prune %s: %w", uuid, err))
			}
			continue
		}
		if !h.Ended.Before(olderThan) {
			continue
		}
		a := Archived{Plan: h.Plan, Summary: plan.View{Plan: h.Plan, Index: h.Index}.Summary(), Ended: *h.Ended, PrunedAt: now}
		raw, err := json.Marshal(a)
		if err != nil {
			return pruned, err
		}
		r, err := s.cli.Txn(ctx).If(cas...).Then(
			clientv3.OpPut(s.summaryKey(uuid), string(raw)),
			clientv3.OpDelete(string(kv.Key)),
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
// how many keys it deleted.
func (s *Store) Sweep(ctx context.Context, uuid string) (int, error) {
	h, version, at, err := s.readHeader(ctx, uuid)
	if err != nil {
		return 0, err
	}
	resp, err := s.cli.Get(ctx, s.prefix+"pages/"+uuid+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(at))
	if err != nil {
		return 0, fmt.Errorf("etcd: sweep %s: %w", uuid, err)
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
	s.deleteKeys(ctx, stale)
	return len(stale), nil
}
