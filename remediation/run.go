package remediation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// Loop returns the Reconciler as a reboot.Runner's loop named
// "remediation" over the Machines keys lists (run it in the same Runner as
// the reboot controller's Reconciler.Loop). A pass that persisted a new
// State is followed at once by another (as its own write would wake it in
// Kubernetes); otherwise RequeueAfter schedules the next pass; a Machine
// that is gone and whose admission is released is left alone (its key
// released: reboot.Next.Release, no more passes, its watch ends) until it
// is listed or added again; a Machine with a remediation under way
// (Result.Busy) is reported reboot.Next.Busy, so that the Runner keeps
// reconciling it when keys no longer lists it (a pass that fails before
// it decides reports neither Busy nor Idle: the key stays as busy as the
// pass before said, and one whose first pass so fails counts as not
// busy; the admitted Machines are listed anyway, see below). Each listing (at start and every Runner.Resync)
// adds the admitted Machines (Admissions) that keys does not list: a
// Machine deleted while no Loop ran (a restart, a leader change) still
// has its request removed from its host and its admission released. A
// listing fails if keys or the admissions' read fails; the Runner then
// tries it again after a back-off (at most a minute). With
// nil keys (only Runner.Add's keys), Add the admitted Machines yourself.
//
// A Machine is woken whenever its record changes (the health checker
// marks it unhealthy, another writer saves its State): at once if
// Machines is a MachineWatcher (Records' is when its RecordStore is a
// RecordWatcher; fake.Cluster and fake.Records are), else within
// Config.PollInterval (default 5 s): the Loop lists Machines (one
// MachineStore.List per interval, whatever their number, while any is
// watched) and wakes those whose Version changed (give your store a Watch
// to spare those listings). When Hosts is a *RebootAPIHosts over a store that
// can watch (reboot.HostWatcher), it is also woken whenever its host's
// record changes: the reboot controller's evidence is acted on at once,
// not at the next poll. The hosts are the one HostOf names and the one
// the Machine's request was written to (State.Host, where its evidence is
// read; for a Machine that is gone, the host its admission records): they
// differ after a move, and both are watched. Each is asked when the
// watch starts (Watch returns without waiting for the answer) and again
// whenever the Machine's record (or a watched host) changes, also when
// the change comes while an earlier answer is awaited (a Machine
// provisioned onto a host, or moved, is then woken by its new host). HostOf calls and host watches
// run on their own goroutines, each bounded (30 s) and retried with a
// back-off: one that hangs never silences the Machine's own wakes.
func (r *Reconciler) Loop(keys func(ctx context.Context) ([]string, error)) reboot.Loop {
	l := reboot.Loop{Name: "remediation", Keys: r.withAdmitted(keys),
		Reconcile: func(ctx context.Context, name string) (reboot.Next, error) {
			res, err := r.Reconcile(ctx, name)
			if errors.Is(err, ErrNotFound) && r.gone(ctx, name) {
				return reboot.Next{Release: true}, nil
			}
			if err == nil && res.Decision.UpdateState {
				// In Kubernetes the Machine's own change would wake it.
				return reboot.Next{After: time.Nanosecond, Busy: res.Busy}, nil
			}
			return reboot.Next{After: res.RequeueAfter, Busy: res.Busy}, err
		}}
	// Shared by every Machine of this Loop: for a store without Watch,
	// or one whose Watch cannot start.
	poll := newPoller(r.Machines, r.Config.withDefaults().PollInterval)
	machine := func(ctx context.Context, name string) (<-chan struct{}, error) {
		if w, ok := r.Machines.(MachineWatcher); ok {
			ch, err := w.Watch(ctx, name)
			if err == nil {
				return ch, nil
			}
			// Polled meanwhile, and the watch tried again with a back-off
			// until it starts.
			return withRetry(ctx,
				func(ctx context.Context) (<-chan struct{}, error) { return w.Watch(ctx, name) },
				func(ctx context.Context) (<-chan struct{}, error) { return poll.Watch(ctx, name) })
		}
		return poll.Watch(ctx, name)
	}
	rh, ok := r.Hosts.(*RebootAPIHosts)
	hw, watches := reboot.HostWatcher(nil), false
	if ok {
		hw, watches = rh.Hosts.(reboot.HostWatcher)
	}
	l.Watch = func(ctx context.Context, name string) (<-chan struct{}, error) {
		if !watches {
			return machine(ctx, name)
		}
		// The host HostOf names, and the one the request was written to
		// (they differ after a move): the evidence is read on the latter.
		mapped := func(ctx context.Context) (<-chan struct{}, error) {
			return watchWithHost(ctx,
				func(ctx context.Context) (<-chan struct{}, error) { return machine(ctx, name) },
				func(ctx context.Context) (string, error) { return rh.HostOf(ctx, name) },
				hw.Watch)
		}
		return watchWithHost(ctx, mapped, func(ctx context.Context) (string, error) { return r.requestHost(ctx, name) }, hw.Watch)
	}
	return l
}

// withAdmitted lists keys' Machines and the admitted ones (Admissions)
// keys does not list: a Machine deleted while no Loop ran is in no
// listing of the Machines, and its admission (with the request that may
// hold its host off) is abandoned only by a pass over its name. nil keys
// stays nil (the keys given to Runner.Add only).
func (r *Reconciler) withAdmitted(keys func(ctx context.Context) ([]string, error)) func(ctx context.Context) ([]string, error) {
	if keys == nil || r.Admissions == nil || r.Table {
		return keys
	}
	return func(ctx context.Context) ([]string, error) {
		names, err := keys(ctx)
		if err != nil {
			return nil, err
		}
		a, err := r.Admissions.GetAdmissions(ctx)
		if err != nil {
			return nil, fmt.Errorf("remediation: admissions: %w", err)
		}
		listed := make(map[string]bool, len(names))
		for _, n := range names {
			listed[n] = true
		}
		for _, m := range a.Machines {
			if !listed[m] {
				listed[m] = true
				names = append(names, m)
			}
		}
		return names, nil
	}
}

// requestHost is the host the Machine's last reboot request was written
// to: State.Host, or for a Machine that is gone the one its admission
// records ("" if none).
func (r *Reconciler) requestHost(ctx context.Context, name string) (string, error) {
	rec, err := r.Machines.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		if r.Admissions == nil {
			return "", nil
		}
		a, err := r.Admissions.GetAdmissions(ctx)
		if err != nil {
			return "", err
		}
		return a.Requests[name].Host, nil
	}
	if err != nil {
		return "", err
	}
	return rec.State.Host, nil
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
