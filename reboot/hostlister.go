package reboot

import (
	"context"
	"log/slog"
	"slices"
)

// HostLister is an optional extension of a HostStore: a store that can
// list every host record it holds. Reconciler.Loop then adds to each
// listing of its keys the hosts whose stored record shows work of this
// controller's under way (a reboot requested or pending, a host held
// off, an Online=false power-off not yet known done, a host set Online
// again after one whose power-on is not yet decided, a power-on not yet
// confirmed, a press that may still be in effect; for a deprovisioned
// host only a pending reboot), so that a host dropped from the inventory
// while no controller ran for it (a restart, a leader change) is still
// finished: powered on once released. For LostLanding + 2x SoftTimeout +
// StaleReads after the Reconciler's first pass, and after it begins to
// lead (each listing asks the Guard, so a standby that became leader with
// no key to pass learns it there), it adds every host the store holds: a
// call of the process or leader before it may still land on any of them,
// and their records may no longer say so (Result.Busy). When List fails,
// the listing is
// keys' own (the error is logged to Reconciler.Logger): the hosts keys
// lists are reconciled all the same, and the Runner keeps every key it
// holds that is busy; only a host no Runner holds yet (after a restart)
// waits for a listing whose List succeeds
// (TestReview40ap_FailingHostListerStallsListedHosts).
// fake.RebootHosts is one; WithPrefix's store is not.
type HostLister interface {
	// List returns every host record the store holds.
	List(ctx context.Context) ([]Host, error)
}

// withBusy returns keys followed by the hosts hl lists that keys does not
// and whose stored record shows work under way (storedBusy). The listing
// fails only if keys fails (the Runner tries it again after a back-off
// and forgets no key meanwhile); if hl's List fails it is keys' alone,
// and the error is logged.
func (r *Reconciler) withBusy(keys func(context.Context) ([]string, error), hl HostLister) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		ks, err := keys(ctx)
		if err != nil {
			return nil, err
		}
		// Does this process lead now? A standby that became leader
		// while its Runner held no key runs no pass that would ask
		// (TestReview40be_FailoverWithNoPassNeverOpensWindow): its
		// othersMayLand window opens here.
		r.probe(ctx)
		hosts, err := hl.List(ctx)
		if err != nil {
			if r.Logger != nil {
				r.Logger.LogAttrs(ctx, slog.LevelWarn, "reboot: list hosts with work under way failed; this listing holds only the inventory's keys (hosts dropped from it while no controller held them wait for the next listing)",
					slog.String("error", err.Error()))
			}
			return ks, nil
		}
		cfg := r.Config.withDefaults()
		listed := make(map[string]bool, len(ks))
		for _, k := range ks {
			listed[k] = true
		}
		out := slices.Clip(ks)
		var more []int // indices in hosts of those storedBusy did not add
		for i, h := range hosts {
			if listed[h.Name] {
				continue
			}
			if storedBusy(h, cfg.Policy) {
				listed[h.Name] = true
				out = append(out, h.Name)
			} else {
				more = append(more, i)
			}
		}
		// A host whose record shows nothing, but that a call of this
		// Reconciler's may still turn on or off (its record deleted and
		// created again meanwhile:
		// TestReview40bb_RecordDeletedAndRecreatedUnlistedDuringOurSoftOffNeverFoundAgain),
		// or, early after the start or a leadership's beginning, one of
		// the process or leader before it (othersMayLand).
		if len(more) > 0 {
			m := r.monotonic()
			r.mu.Lock()
			for _, i := range more {
				h := &hosts[i]
				c := cfg.forHost(Observed{StaleReads: h.StaleReads, OffSettle: h.OffSettle})
				if hm := r.hosts[h.Name]; r.othersMayLand(m, c) || hm != nil && hm.mayChangeFor(*h, c, m) {
					out = append(out, h.Name)
				}
			}
			r.mu.Unlock()
		}
		return out, nil
	}
}
