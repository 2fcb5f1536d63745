package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// metaOwed is the key, in the plan store's meta bucket, of the ledger of
// what the fleet state file the lease names still owes servers
// (inventory.Fleet.Owed): written by the executor that holds the lease
// with every claim where it changed, and when it stops (release), so
// that a successor with another fleet state file is refused while that
// file owes anything (owedElsewhere).
const metaOwed = "executor-owed"

// owedEntry is one entry of the ledger: what the fleet state file owes
// a server, and the abandon of that server the store held when the
// ledger first listed the entry (AbandonSeen, its time; zero if none).
// Only an abandon made since gives the entry up, or one in the entry's
// own plan (owedElsewhere): an older abandon, in another plan, was undone
// by the job that took the server back and owes it now.
type owedEntry struct {
	inventory.Owed
	AbandonSeen time.Time `json:"abandon_seen,omitempty"`
}

// sameOwed reports whether a and b are the same thing owed (the same
// server, plan, job and what).
func sameOwed(a, b inventory.Owed) bool {
	return a.Server == b.Server && a.Plan == b.Plan && a.Job == b.Job && a.What == b.What
}

// putOwed writes the ledger, unless it holds owed already: an entry
// already listed keeps its AbandonSeen, a new one records the store's
// abandon of its server now.
func putOwed(ctx context.Context, st *plan.BoltStore, owed []inventory.Owed) error {
	prev, _ := readOwed(ctx, st) // a ledger that does not decode is replaced
	rawAbandoned, err := st.GetMeta(ctx, metaAbandoned)
	if err != nil {
		return err
	}
	abandoned := readAbandoned(rawAbandoned)
	entries := make([]owedEntry, 0, len(owed))
	for _, o := range owed {
		e := owedEntry{Owed: o, AbandonSeen: abandoned[o.Server].At}
		for _, p := range prev {
			if sameOwed(p.Owed, o) {
				e.AbandonSeen = p.AbandonSeen
				break
			}
		}
		entries = append(entries, e)
	}
	out, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	old, err := st.GetMeta(ctx, metaOwed)
	if err != nil || bytes.Equal(old, out) {
		return err
	}
	return st.PutMeta(ctx, metaOwed, out)
}

// readOwed reads the ledger; one that does not decode (hostile bytes, a
// torn write) owes nothing it can name, and is said so by the error. An
// entry written by a rebootctl that recorded no AbandonSeen has none
// (zero): any abandon of its server gives it up.
func readOwed(ctx context.Context, st *plan.BoltStore) ([]owedEntry, error) {
	raw, err := st.GetMeta(ctx, metaOwed)
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var owed []owedEntry
	if err := json.Unmarshal(raw, &owed); err != nil {
		return nil, errors.Join(errors.New("the ledger of what the last executor's fleet state file owes (meta key "+metaOwed+") does not decode; "+
			"start the executor with that executor's fleet state file (it writes the ledger again)"), err)
	}
	return owed, nil
}

// leaseHolder is the executor's lease on its plan store: the claim it
// renews, the lease it took the store from, and once its fleet is open
// the fleet state file's generation, advanced before every pass's claim,
// and the ledger of what the file owes, written with every claim.
type leaseHolder struct {
	store lockedStore

	mu   sync.Mutex
	me   lease
	took lease // the lease the first claim replaced, another's (zero if none)
	// claimed: a claim landed (the store's lease records me.Gen), and
	// none failed since.
	claimed bool
	// held: a claim of this holder landed once. Its claims are renewals
	// from then on: another executor's lease found ends them at once
	// (claimLease), with no wait.
	held  bool
	fleet *inventory.Fleet
}

// lease is the holder's lease as last claimed.
func (h *leaseHolder) lease() lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.me
}

// identify records the fleet state file's identity in the lease (claimed
// at the next claim).
func (h *leaseHolder) identify(id inventory.FleetIdentity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.me.StateID, h.me.Gen, h.me.prevGen = id.ID, id.Gen, id.PrevGen
}

// open gives the holder its fleet, open: from then on every claim writes
// what the fleet state file owes, and every renew advances its
// generation.
func (h *leaseHolder) open(f *inventory.Fleet) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fleet = f
}

// claim takes or renews the lease (claimLease: the first claim waits
// for another executor's lease to lapse, the next ones are renewals),
// with the ledger of what the fleet state file owes once the fleet is
// open.
func (h *leaseHolder) claim(ctx context.Context, now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var owed []inventory.Owed
	if h.fleet != nil {
		var err error
		if owed, err = h.fleet.Owed(); err != nil {
			h.claimed = false
			return err
		}
		if owed == nil {
			owed = []inventory.Owed{}
		}
	}
	cur, err := claimLease(ctx, h.store, h.me, h.took, owed, now, h.held)
	if err != nil {
		h.claimed = false
		return err
	}
	h.held = true
	if h.took.ID == "" && cur.ID != "" && cur.ID != h.me.ID {
		h.took = cur
	}
	h.claimed = true
	return nil
}

// renew is a pass's claim: the fleet state file's generation advanced
// first, when the store's lease records the one it has (once a claim
// failed, the next claims the generation advanced before it: the file
// holds only it and the one the store's lease may still record), then
// the claim.
func (h *leaseHolder) renew(ctx context.Context, now time.Time) error {
	h.mu.Lock()
	f, advance := h.fleet, h.fleet != nil && h.claimed
	h.mu.Unlock()
	if advance {
		id, err := f.Advance()
		if err != nil {
			return err
		}
		h.identify(id)
	}
	return h.claim(ctx, now)
}

// owed is what the fleet state file owes, for release: nil if not known.
func (h *leaseHolder) owed() []inventory.Owed {
	h.mu.Lock()
	f := h.fleet
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	owed, err := f.Owed()
	if err != nil {
		return nil
	}
	if owed == nil {
		owed = []inventory.Owed{}
	}
	return owed
}

// errLeaseStale: no renewal of the executor's lease landed for half its
// time to live during a pass (the store was held that long, or the
// process was paused): the pass stops acting.
var errLeaseStale = errors.New("the executor's lease was not renewed in time")

// leasedPass runs pass on a context that ends, and with it every start
// and every record of the pass (plan.Executor checks it before each
// action; passAll before ending jobs), once the lease cannot be counted
// on: a renewal during the pass (every interval, with the heartbeat)
// fails, or none landed for half the lease's time to live since start
// (the last renewal's start). It returns the renewal's error when it
// means the executor must stop (leaseLost), else pass's.
func (e *env) leasedPass(h *leaseHolder, start time.Time, interval time.Duration, logger *slog.Logger, publish func(), pass func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	hold := (3*interval + 10*time.Second) / 2
	stale := func() { cancel(fmt.Errorf("%w: none landed for %s; the pass stops", errLeaseStale, hold)) }
	guard := time.AfterFunc(hold-time.Since(start), stale)
	defer guard.Stop()
	err := beatDuring(ctx, interval, func() {
		at := time.Now()
		if err := h.claim(e.ctx, at.UTC()); err != nil {
			if e.ctx.Err() == nil {
				logger.Warn("lease not renewed during a pass: the pass stops (nothing more started or recorded)", "error", err.Error())
			}
			cancel(err)
			return
		}
		guard.Reset(hold - time.Since(at))
		publish()
	}, func() error { return pass(ctx) })
	if c := context.Cause(ctx); leaseLost(c) && e.ctx.Err() == nil {
		return c
	}
	return err
}

// fence is nil when the executor's write may land, in the same open of
// the store as the write: the store's lease is still its own (an
// executor that took the store over, even one that died since, wrote
// its own), or it is no executor (env.leaseID unset). An executor paused
// past its lease (a VM paused, SIGSTOP) and resumed mid-pass never
// records what it decided from what it saw before.
func (s lockedStore) fence(ctx context.Context, st *plan.BoltStore) error {
	if s.e.leaseID == "" {
		return nil
	}
	raw, err := st.GetMeta(ctx, metaLease)
	if err != nil {
		return err
	}
	var cur lease
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &cur)
	}
	if cur.ID != s.e.leaseID {
		return fmt.Errorf("%w (%s): this executor's lease was taken over, so it records nothing more", errOtherExecutor, cur)
	}
	return nil
}
