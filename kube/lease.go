package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrNotLeader: a power call refused because this process may no longer
// hold the leader lease (it was not renewed recently enough, with the
// guard's margin). It wraps reboot.ErrNotLeader, so that the reboot
// controller counts the call as not tried (reboot.CallClass).
var ErrNotLeader = fmt.Errorf("kube: not the leader (lease not held with the margin): no power call: %w", reboot.ErrNotLeader)

// LeaseGuard makes leadership a fence for power calls. Leader election is
// a lease: a leader paused after a versioned write, or finishing its
// reconciles while it loses the lease, could power a host on after the new
// leader powered it off for a fencing request. The guard is the manager's
// leader-election lock (ctrl.Options.LeaderElectionResourceLockInterface)
// and notes, on a monotonic clock, when each renewal of this process's
// lease was sent; Wrap's controllers make a power-on or power-off only
// while the lease renewed last is held for at least Margin more, and bound
// the call by the lease's end. The lease's end is the renewal's sending
// plus the record's leaseDurationSeconds (what the other candidates wait),
// not the configured LeaseDuration: client-go writes whole seconds, so
// 1800ms is a 1 s lease and anything under 1 s none. Other candidates take the lease only
// LeaseDuration after they saw it renewed, which is after the renewal was
// sent, so a call the guard lets through ends before another leader can
// act. Power readings are not guarded.
//
// The argument assumes that the processes' monotonic clocks run at the
// same rate within Margin over a LeaseDuration (they measure it), and that
// a call sent before its deadline is not applied by the BMC after it
// (Margin covers the delivery).
//
// The other candidates do not always wait: a Lease deleted (`kubectl
// delete lease`) or whose holderIdentity is cleared or changed by hand is
// taken at once. While it holds the lease, a guard made by NewLeaseGuard
// (or whose Lock is a *resourcelock.LeaseLock) reads and then watches the
// Lease; seen deleted or held by another identity, the lease is lost at
// once, within the watch's latency (milliseconds on a healthy API
// server): Hold refuses, and the contexts it and the wrapped power calls
// got have ended, until a renewal of this process holds the Lease again
// (one sent after the loss was seen: the answer of a renewal sent before
// it, arriving late, does not count).
// A watch that ends or fails is followed by a read of the Lease and a new
// watch (with a back-off while reads fail); the lease's own bound above
// holds whatever the watch sees. Releasing the lease (a record written
// with another holder) ends those contexts too. The guard's identity
// needs get and watch on the Lease (leader election already needs get,
// create and update).
type LeaseGuard struct {
	// Lock is the real lock (a Lease, resourcelock.New).
	Lock resourcelock.Interface
	// LeaseDuration is the manager's (ctrl.Options.LeaseDuration).
	LeaseDuration time.Duration
	// Margin is how long before the lease's end power calls stop
	// (default a third of the lease's duration as the record says it).
	Margin time.Duration
	// Monotonic is the clock (default: the process's monotonic clock).
	// The guard's Lease watch calls it from its own goroutine: it must be
	// safe for concurrent use.
	Monotonic func() time.Duration

	mu         sync.Mutex
	validUntil time.Duration
	duration   time.Duration // the lease's, from the record last written
	held       bool
	// sends counts the writes of the record sent (Create, Update);
	// lostAt is sends when the watch last saw the Lease lost (deleted or
	// held by another): a write sent before then, whatever its answer,
	// does not hold the Lease again.
	sends, lostAt uint64
	// term is the current stretch of holding (leasewatch.go): it ends,
	// and with it the contexts Hold and the power calls got, when the
	// Lease is seen deleted or held by another, or released.
	term *leaseTerm
	// terms counts the terms begun (Term).
	terms uint64
	// leases, leaseNS and leaseName: where NewLeaseGuard's Lease is
	// watched, through a client without the lock's request timeout.
	leases             coordinationv1client.LeasesGetter
	leaseNS, leaseName string
}

var _ resourcelock.Interface = (*LeaseGuard)(nil)

var guardStart = time.Now()

// NewLeaseGuard returns a guard over a Lease lock named name in namespace
// ns for identity id.
func NewLeaseGuard(cfg *rest.Config, ns, name, id string, leaseDuration, renewDeadline time.Duration) (*LeaseGuard, error) {
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, ns, name,
		resourcelock.ResourceLockConfig{Identity: id}, cfg, renewDeadline)
	if err != nil {
		return nil, fmt.Errorf("kube: leader lease: %w", err)
	}
	leases, err := coordinationv1client.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("kube: leader lease watch: %w", err)
	}
	return &LeaseGuard{Lock: lock, LeaseDuration: leaseDuration, leases: leases, leaseNS: ns, leaseName: name}, nil
}

func (g *LeaseGuard) now() time.Duration {
	if g.Monotonic != nil {
		return g.Monotonic()
	}
	return time.Since(guardStart)
}

func (g *LeaseGuard) margin(d time.Duration) time.Duration {
	if g.Margin > 0 {
		return g.Margin
	}
	return d / 3
}

// send notes a write of the record about to be sent: its sending time
// on the monotonic clock and its sequence number (wrote).
func (g *LeaseGuard) send() (time.Duration, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sends++
	return g.now(), g.sends
}

// wrote notes a successful write of the record ler sent at sent, the
// seq-th write sent. The lease lasts what the record says
// (leaseDurationSeconds, whole seconds: client-go writes LeaseDuration
// truncated, and the other candidates wait only that long), never more
// than LeaseDuration. A write sent before the watch saw the Lease lost
// (deleted, or held by another) begins no term: it was applied before
// the loss, or raced it, and the Lease may name another leader now; the
// next renewal, sent after the loss, holds it again if it succeeds.
func (g *LeaseGuard) wrote(ler resourcelock.LeaderElectionRecord, sent time.Duration, seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := min(time.Duration(ler.LeaseDurationSeconds)*time.Second, g.LeaseDuration)
	if ler.HolderIdentity != g.Lock.Identity() || d <= 0 {
		g.held = false // released, or a lease no other candidate waits for
		if g.term != nil {
			g.term.cancel()
		}
		return
	}
	if seq <= g.lostAt {
		return
	}
	if g.term != nil && sent >= g.validUntil {
		// The lease had run out unrenewed when this write was sent:
		// another candidate may have held it meanwhile, so this write
		// begins a new term (Term), whether or not the watch saw that.
		g.term.cancel()
	}
	g.beginTerm()
	g.held, g.validUntil, g.duration = true, sent+d, d
}

// Get implements resourcelock.Interface.
func (g *LeaseGuard) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return g.Lock.Get(ctx)
}

// Create implements resourcelock.Interface.
func (g *LeaseGuard) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent, seq := g.send()
	err := g.Lock.Create(ctx, ler)
	if err == nil {
		g.wrote(ler, sent, seq)
	}
	return err
}

// Update implements resourcelock.Interface.
func (g *LeaseGuard) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent, seq := g.send()
	err := g.Lock.Update(ctx, ler)
	if err == nil {
		g.wrote(ler, sent, seq)
	}
	return err
}

// RecordEvent implements resourcelock.Interface.
func (g *LeaseGuard) RecordEvent(s string) { g.Lock.RecordEvent(s) }

// Identity implements resourcelock.Interface.
func (g *LeaseGuard) Identity() string { return g.Lock.Identity() }

// Describe implements resourcelock.Interface.
func (g *LeaseGuard) Describe() string { return g.Lock.Describe() }

// remaining is how long power calls may still run (<= 0: none).
func (g *LeaseGuard) remaining() time.Duration {
	left, _ := g.holdTerm()
	return left
}

// Term implements reboot.GuardTerm: the number of the current term of
// holding the Lease, or zero while none is held (not yet written, the
// Lease seen deleted or held by another, released, or its lease run out
// unrenewed on the guard's clock). A new term begins after the last one
// ended, and when a write is sent after the lease ran out (another
// candidate may have held it meanwhile, seen by the watch or not). A Hold
// refused inside the margin while the lease is renewed in time keeps the
// term. Term reads non-zero until the lease's end on the guard's clock,
// while Hold refuses from the margin before it: within assumption A4
// another candidate, whose clock runs fast, may take the Lease in that
// margin while Term still reads this term (reboot.GuardTerm says so).
func (g *LeaseGuard) Term() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held || g.term == nil || g.term.ctx.Err() != nil || g.now() >= g.validUntil {
		return 0
	}
	return g.terms
}

var _ reboot.GuardTerm = (*LeaseGuard)(nil)

// Held reports whether this process holds the lease with the margin.
func (g *LeaseGuard) Held() bool { return g.remaining() > 0 }

// Wrap returns pc with its On, Off, OnChecked and Reset guarded.
func (g *LeaseGuard) Wrap(pc power.Controller) power.Controller { return &guarded{g: g, pc: pc} }

type guarded struct {
	g  *LeaseGuard
	pc power.Controller
}

func (c *guarded) State(ctx context.Context) (power.State, error) { return c.pc.State(ctx) }

func (c *guarded) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel, ok := c.g.within(ctx)
	if !ok {
		return ErrNotLeader
	}
	defer cancel()
	return f(ctx)
}

func (c *guarded) On(ctx context.Context) error { return c.call(ctx, c.pc.On) }

func (c *guarded) Off(ctx context.Context, m power.Mode) error {
	return c.call(ctx, func(ctx context.Context) error { return c.pc.Off(ctx, m) })
}

// OnChecked is guarded as On is (power.CheckedOner): check runs within
// the lease's remaining time, as the power-on does.
func (c *guarded) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.call(ctx, func(ctx context.Context) error { return onCheckedOf(ctx, c.pc, check) })
}

// Reset is guarded as On and Off are (power.Resetter).
func (c *guarded) Reset(ctx context.Context) error {
	return c.call(ctx, func(ctx context.Context) error { return resetOf(ctx, c.pc) })
}

// TogglesOff passes on the wrapped controller's reboot.Toggler (false if
// it has none), so that the reboot controller's press rule applies.
func (c *guarded) TogglesOff(m power.Mode) bool { return togglesOff(c.pc, m) }

// togglesOff is pc's reboot.Toggler answer for mode m, false if pc has
// none. Every wrapper of a power.Controller in this package passes it on
// (TestWrappersForwardExtensions).
func togglesOff(pc power.Controller, m power.Mode) bool {
	t, ok := pc.(reboot.Toggler)
	return ok && t.TogglesOff(m)
}

// TogglesOn passes on the wrapped controller's reboot.OnToggler (false if
// it has none).
func (c *guarded) TogglesOn() bool { return togglesOn(c.pc) }

// togglesOn is pc's reboot.OnToggler answer, false if pc has none.
func togglesOn(pc power.Controller) bool {
	t, ok := pc.(reboot.OnToggler)
	return ok && t.TogglesOn()
}

// Hold implements reboot.Guard, so that a reboot.Reconciler or
// remediation.Reconciler run outside a controller-runtime manager (or its
// store writes) is fenced by the same lease: it answers only while the
// lease is held with the margin, and its context ends at the lease's end
// minus the margin (its Err compares the monotonic clock with that end:
// reboot.ClockBound, so a process paused past it finds it ended on
// resume), or as soon as the Lease is seen deleted or held by another
// (see LeaseGuard). A pause after the store's last check of the context
// can still land that one write late: only a write the API server fences
// itself (a resourceVersion precondition the next leader's write bumps)
// cannot.
func (g *LeaseGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	c, cancel, ok := g.within(ctx)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %w", reboot.ErrNotLeader, ErrNotLeader)
	}
	return c, cancel, nil
}

var _ reboot.Guard = (*LeaseGuard)(nil)
