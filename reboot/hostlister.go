package reboot

import (
	"context"
	"fmt"
	"slices"
)

// HostLister is an optional extension of a HostStore: a store that can
// list every host record it holds. Reconciler.Loop then adds to each
// listing of its keys the hosts whose stored record shows work of this
// controller's under way (a reboot requested or pending, a host held
// off, an Online=false power-off not yet known done, a power-on not yet
// confirmed, a press that may still be in effect), so that a host
// dropped from the inventory while no controller ran for it (a restart,
// a leader change) is still finished: powered on once released.
// fake.RebootHosts is one; WithPrefix's store is not.
type HostLister interface {
	// List returns every host record the store holds.
	List(ctx context.Context) ([]Host, error)
}

// withBusy returns keys followed by the hosts hl lists that keys does not
// and whose stored record shows work under way (storedBusy). The listing
// fails if keys or hl's List fails (the Runner tries it again after a
// back-off and forgets no key meanwhile).
func (r *Reconciler) withBusy(keys func(context.Context) ([]string, error), hl HostLister) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		ks, err := keys(ctx)
		if err != nil {
			return nil, err
		}
		hosts, err := hl.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("reboot: list hosts with work under way: %w", err)
		}
		p := r.Config.withDefaults().Policy
		listed := make(map[string]bool, len(ks))
		for _, k := range ks {
			listed[k] = true
		}
		out := slices.Clip(ks)
		for _, h := range hosts {
			if !listed[h.Name] && storedBusy(h, p) {
				listed[h.Name] = true
				out = append(out, h.Name)
			}
		}
		return out, nil
	}
}
