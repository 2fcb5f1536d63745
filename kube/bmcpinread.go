package kube

import (
	"context"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
)

// pinnedReadWait bounds how long checkPin waits for the pinned BMC's
// reading (as Async.Wait bounds a pass's BMC call); pinnedReadFresh is
// how long a reading that ended after its pass stopped waiting is kept
// for a later pass.
const (
	pinnedReadWait  = 250 * time.Millisecond
	pinnedReadFresh = 30 * time.Second
	pinnedReadLimit = 5 * time.Minute
)

// pinnedRead is one State call of a host's pinned BMC, run in a goroutine
// of its own (Powers.pinned, at most one per host).
type pinnedRead struct {
	pin  v1alpha1.BMCPin
	done chan struct{} // closed when the reading ended
	off  bool          // read Off (set before done is closed)
	end  time.Time
}

// pinnedReadsOff reports whether the BMC pin names (bmh's BMC when its
// reboot became pending, trusted with its credentials) reads Off: one
// State call through the pool, under a name of its own that is forgotten
// after, run in the background (a login to a dead old BMC takes the
// pool's whole timeouts) and waited for at most pinnedReadWait, so that a
// reconcile worker never waits on it for longer. While it runs, the error
// wraps ErrInFlight (the host is requeued); a reading that ends later is
// kept for the host's next pass (within pinnedReadFresh). Any failure of
// the call is false (not known to be off).
func (p *Powers) pinnedReadsOff(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin) (bool, error) {
	p.mu.Lock()
	if p.pinned == nil {
		p.pinned = map[string]*pinnedRead{}
	}
	r := p.pinned[bmh.Name]
	if r != nil && r.pin != *pin {
		select {
		case <-r.done:
			r = nil // another pin's reading: not this one's
		default:
			p.mu.Unlock()
			return false, fmt.Errorf("host %s: a power reading of its previously pinned BMC is still running: %w", bmh.Name, ErrInFlight)
		}
	}
	if r != nil {
		select {
		case <-r.done:
			if time.Since(r.end) > pinnedReadFresh {
				r = nil
			}
		default:
		}
	}
	if r == nil {
		r = &pinnedRead{pin: *pin, done: make(chan struct{})}
		p.pinned[bmh.Name] = r
		old := bmh.DeepCopy()
		go p.readPinned(old, r)
	}
	p.mu.Unlock()
	t := time.NewTimer(pinnedReadWait)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		return false, fmt.Errorf("host %s: a power reading of its pinned BMC %q is still running: %w", bmh.Name, pin.Address, ErrInFlight)
	}
	p.mu.Lock()
	if p.pinned[bmh.Name] == r {
		delete(p.pinned, bmh.Name) // a reading is used once
	}
	p.mu.Unlock()
	return r.off, nil
}

// readPinned makes r's State call of the BMC r.pin names, for the host
// old (a copy of its BareMetalHost), bounded by the pool's timeouts and
// pinnedReadLimit.
func (p *Powers) readPinned(old *metal3.BareMetalHost, r *pinnedRead) {
	defer func() {
		r.end = time.Now()
		close(r.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), pinnedReadLimit)
	defer cancel()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = r.pin.Address, r.pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = r.pin.DisableCertificateVerification
	key := old.Name + "\x00pinned"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		return
	}
	defer p.pool().Forget(key)
	s, err := pc.State(ctx)
	r.off = err == nil && s == power.StateOff
}
