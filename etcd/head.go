package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

var _ plan.HeadStore = (*Store)(nil)

// GetHead implements plan.HeadStore: the plan's header key alone, one
// read whatever the plan's size; when the header is the one this store
// last read or its pass wrote, a comparison of its revision (knownHead),
// neither fetched nor decoded again.
func (s *Store) GetHead(ctx context.Context, uuid string) (plan.View, error) {
	k, _, _, _, err := s.headerAt(ctx, uuid)
	if err != nil {
		return plan.View{}, err
	}
	// The header is kept (knownHead): the caller gets its own copy.
	p := ownPlan(k.h.Plan)
	p.Reboots = nil
	p.Version = formatVersion(k.rev, k.h.tok)
	ix := k.h.Index
	ix.InFlight, ix.DoneHist = slices.Clone(ix.InFlight), maps.Clone(ix.DoneHist)
	return plan.View{Plan: p, Index: ix, Pos: []int{}}, nil
}

var _ plan.StateStore = (*Store)(nil)

// GetState implements plan.StateStore: the plan's state as GetHead reads
// it (one small read-only transaction when the header is the one this
// store knows), without copying the header. It is the read CommandPending
// compares with (plan.Executor reads the state before its jobs).
func (s *Store) GetState(ctx context.Context, uuid string) (plan.State, error) {
	start := time.Now()
	k, _, _, _, err := s.headerAt(ctx, uuid)
	if err != nil {
		return "", err
	}
	s.sawState(uuid, k, start)
	return k.h.Plan.State, nil
}

// PutHead implements plan.HeadStore: the header rewritten with hv's plan
// (its index, pages and overlays as stored), in one transaction that
// compares the header's revision (and the guard). An executor's pass
// written since loses nothing: the operator's write makes the pass's
// compare-and-swap fail, and the pass decides again from a fresh read.
func (s *Store) PutHead(ctx context.Context, hv plan.View) error {
	if len(hv.Reboots) != 0 {
		return fmt.Errorf("plan %s: PutHead writes the header only, not %d reboots", hv.UUID, len(hv.Reboots))
	}
	if err := hv.Plan.Validate(); err != nil {
		return err
	}
	rev, tok, err := parseVersion(hv.UUID, hv.Version)
	if err != nil {
		return err
	}
	// After a read of this version (GetHead), the header it read is the
	// one stored at that version (the write compares it): one round trip.
	k, ok := s.known(hv.UUID)
	old := k.h
	if !ok || k.rev != rev || k.h.tok != tok {
		var version int64
		if old, version, _, err = s.readHeader(ctx, hv.UUID); err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		if version != rev || old.tok != tok {
			return s.refused(ctx, hv.UUID, fmt.Errorf("plan %s: %w", hv.UUID, plan.ErrConflict))
		}
	}
	nh := old
	nh.Plan = hv.Plan
	return s.write(ctx, hv.UUID, rev, old, nh, nil)
}

// Heads returns every retained plan (unfinished, or ended within the
// retention) as a view of its header alone: the plan without its reboots,
// and its index (View.Summary gives the counts, View.SummaryAt the ETA),
// read at one revision, no page read or decoded. It is what a listing of
// plans needs; List (plan.Store) reads every page. A header that cannot be
// read is reported in the error (wrapping plan.ErrCorrupt) after the
// readable ones. The store's caches of the plans it reads ended are
// evicted (forget).
func (s *Store) Heads(ctx context.Context) ([]plan.View, error) {
	heads, tok, _, err := s.listHeaders(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]plan.View, 0, len(heads))
	var bad, over []string
	for _, kv := range heads {
		uuid := strings.TrimPrefix(string(kv.Key), s.headersPrefix())
		h, err := decodeHeader(uuid, kv.Value)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if ended(h) {
			over = append(over, uuid)
		}
		p := h.Plan
		p.Reboots = nil
		p.Version = formatVersion(kv.ModRevision, tok[uuid])
		out = append(out, plan.View{Plan: p, Index: h.Index, Pos: []int{}})
	}
	s.forgetAll(over)
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %s", plan.ErrCorrupt, strings.Join(bad, "; "))
	}
	return out, nil
}
