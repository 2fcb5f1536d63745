package remediation

import (
	"context"
	"errors"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// Loop returns the Reconciler as a reboot.Runner's loop named
// "remediation" over the Machines keys lists (run it in the same Runner as
// the reboot controller's Reconciler.Loop). A pass that persisted a new
// State is followed at once by another (as its own write would wake it in
// Kubernetes); otherwise RequeueAfter schedules the next pass; a Machine that is gone and whose admission is released is
// left alone until it is listed or added again. When Hosts is a
// *RebootHosts over a store that can watch (reboot.HostWatcher), a
// Machine is woken whenever its host's record changes: the reboot
// controller's evidence is acted on at once, not at the next poll.
func (r *Reconciler) Loop(keys func(ctx context.Context) ([]string, error)) reboot.Loop {
	l := reboot.Loop{Name: "remediation", Keys: keys,
		Reconcile: func(ctx context.Context, name string) (reboot.Next, error) {
			res, err := r.Reconcile(ctx, name)
			if errors.Is(err, ErrNotFound) && r.gone(ctx, name) {
				return reboot.Next{}, nil
			}
			if err == nil && res.Decision.UpdateState {
				// In Kubernetes the Machine's own change would wake it.
				return reboot.Next{After: time.Nanosecond}, nil
			}
			return reboot.Next{After: res.RequeueAfter}, err
		}}
	if rh, ok := r.Hosts.(*RebootHosts); ok {
		if w, ok := rh.Hosts.(reboot.HostWatcher); ok {
			l.Watch = func(ctx context.Context, machine string) (<-chan struct{}, error) {
				host, err := rh.HostOf(ctx, machine)
				if err != nil {
					return nil, err
				}
				if host == "" {
					ch := make(chan struct{})
					go func() { <-ctx.Done(); close(ch) }()
					return ch, nil
				}
				return w.Watch(ctx, host)
			}
		}
	}
	return l
}

// gone reports whether the Machine is gone and holds no admission.
func (r *Reconciler) gone(ctx context.Context, name string) bool {
	if _, err := r.Machines.Get(ctx, name); !errors.Is(err, ErrNotFound) {
		return false
	}
	if r.Admissions == nil {
		return true
	}
	a, err := r.Admissions.GetAdmissions(ctx)
	return err == nil && !a.Has(name)
}
