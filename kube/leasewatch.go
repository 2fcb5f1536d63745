package kube

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/rebootkit/rebootkit/reboot"
)

// leaseTerm is one stretch of holding the lease, from the write that took
// (or found) it held by this process to its loss: its context ends then.
type leaseTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// leaseWatchTimeout bounds each read of the Lease by the watch.
const leaseWatchTimeout = 5 * time.Second

// watched is where the Lease is read and watched: the client, namespace
// and name given to NewLeaseGuard (a client without the lock's request
// timeout, which would cut a watch short), else the lock's own if it is
// a *resourcelock.LeaseLock; ok false if neither.
func (g *LeaseGuard) watched() (leases coordinationv1client.LeasesGetter, ns, name string, ok bool) {
	if g.leases != nil {
		return g.leases, g.leaseNS, g.leaseName, true
	}
	if ll, isLease := g.Lock.(*resourcelock.LeaseLock); isLease && ll.Client != nil {
		return ll.Client, ll.LeaseMeta.Namespace, ll.LeaseMeta.Name, true
	}
	return nil, "", "", false
}

// beginTerm starts a term if none runs (g.mu held), with its watch of the
// Lease when there is one to watch.
func (g *LeaseGuard) beginTerm() {
	if g.term != nil && g.term.ctx.Err() == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.term = &leaseTerm{ctx: ctx, cancel: cancel}
	g.terms++
	if leases, ns, name, ok := g.watched(); ok {
		go g.watchLease(g.term, leases.Leases(ns), name)
	}
}

// endTerm ends term if it is the current one: the lease is no longer
// held, Hold refuses and the contexts it returned end; lost (the Lease
// seen deleted or held by another) also makes the writes sent so far
// unable to begin a term again (wrote). A term already replaced (a later
// write found the lease held again) is only ended.
func (g *LeaseGuard) endTerm(term *leaseTerm, lost bool) {
	g.mu.Lock()
	if g.term == term {
		g.held = false
		if lost {
			g.lostAt = g.sends
		}
	}
	g.mu.Unlock()
	term.cancel()
}

// expired reports whether term's lease ran out unrenewed (it is over: a
// later renewal starts another).
func (g *LeaseGuard) expired(term *leaseTerm) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.term != term || !g.held || g.now() >= g.validUntil
}

// watchLease ends term as soon as the Lease is seen deleted or held by
// another identity (an operator's `kubectl delete lease`, or an edit of
// its holderIdentity: another candidate takes it at once), or once the
// lease ran out unrenewed. It reads the Lease, then watches it from the
// version read, so no change between the two is missed; a watch that ends
// (the API server closes watches now and then) or fails is followed by a
// read again, with a back-off while reads fail.
func (g *LeaseGuard) watchLease(term *leaseTerm, leases coordinationv1client.LeaseInterface, name string) {
	id := g.Lock.Identity()
	wait := 100 * time.Millisecond
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for term.ctx.Err() == nil {
		if g.expired(term) {
			g.endTerm(term, false)
			return
		}
		rctx, cancel := context.WithTimeout(term.ctx, leaseWatchTimeout)
		l, err := leases.Get(rctx, name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err), err == nil && !heldBy(l, id):
			g.endTerm(term, true)
			return
		case err == nil:
			w, werr := leases.Watch(term.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
				ResourceVersion: l.ResourceVersion})
			if werr == nil {
				lost, expired := g.follow(term, w, id, tick.C)
				w.Stop()
				if lost || expired {
					g.endTerm(term, lost)
					return
				}
				wait = 100 * time.Millisecond
				continue
			}
		}
		select {
		case <-term.ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// follow reads w until it ends: lost when the Lease is deleted or held by
// another identity, expired when term's lease ran out meanwhile (checked
// at every tick).
func (g *LeaseGuard) follow(term *leaseTerm, w watch.Interface, id string, tick <-chan time.Time) (lost, expired bool) {
	for {
		select {
		case <-term.ctx.Done():
			return false, false
		case <-tick:
			if g.expired(term) {
				return false, true
			}
		case ev, open := <-w.ResultChan():
			if !open {
				return false, false
			}
			switch ev.Type {
			case watch.Deleted:
				return true, false
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && !heldBy(l, id) {
					return true, false
				}
			case watch.Error:
				return false, false // e.g. the version read is too old: read again
			}
		}
	}
}

// heldBy reports whether the Lease names id as its holder.
func heldBy(l *coordinationv1.Lease, id string) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == id
}

// holdTerm returns what remains of the lease (<= 0: not held) and the
// current term (nil without one), together.
func (g *LeaseGuard) holdTerm() (time.Duration, *leaseTerm) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		return 0, nil
	}
	return g.validUntil - g.margin(g.duration) - g.now(), g.term
}

// within returns ctx bounded by what remains of the lease and ended with
// its term, or ok false when the lease is not held with the margin. The
// context's Err compares the clock with that bound (reboot.ClockBound,
// the rule reboot's Fenced applies): a process paused past the lease's
// end finds it ended when it resumes, before the deadline's timer fires.
func (g *LeaseGuard) within(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	left, term := g.holdTerm()
	if left <= 0 {
		return nil, nil, false
	}
	c, cancel := context.WithTimeout(ctx, left)
	if term == nil {
		return reboot.ClockBound(c), cancel, true
	}
	stop := context.AfterFunc(term.ctx, cancel)
	return reboot.ClockBound(c), func() { stop(); cancel() }, true
}
