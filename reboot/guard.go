package reboot

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotLeader: a Guard refused a store write or a power call because this
// process does not hold the leadership (assumption A4), or may no longer
// hold it by the time the call lands.
var ErrNotLeader = errors.New("reboot: not the leader: no write and no power call")

// Guard fences a controller by its leadership (assumption A4: one
// controller acts on a host at a time). Reconciler (and
// remediation.Reconciler) ask it right before every store write and every
// power call, never to fence a read; the Reconciler also asks it at the
// start of every pass, and its Loop at every listing over a HostLister,
// only to learn whether it leads (the first Hold that
// succeeds after a refusal, or after its start, begins its leadership: see
// doc.go, Evidence).
//
// Leadership is a lease: a leader paused after it read the store, or
// finishing a pass while it loses the lease, could otherwise write or power
// a host on after the next leader fenced it. A Guard closes that gap as far
// as a lease can: Hold answers only while the lease is held with a margin,
// and bounds the call by the lease's end.
//
// Implementations: etcd.Leadership.Guard (an etcd election's lease) and
// kube.LeaseGuard (a Kubernetes Lease). A process that is the only
// controller by construction needs none (nil).
type Guard interface {
	// Hold returns a context derived from ctx whose deadline is no later
	// than the moment another process may take the leadership (minus the
	// guard's margin), and its cancel function; or an error wrapping
	// ErrNotLeader if this process does not hold the leadership with the
	// margin now (then it must not act). The caller makes its one write or
	// power call with that context and then cancels it.
	Hold(ctx context.Context) (context.Context, context.CancelFunc, error)
}

// GuardTerm is an optional extension of Guard (found by type assertion):
// it tells a lease held without a break from one lost or lapsed. Without
// it, every Hold refused makes the Reconciler stand by, and the next that
// succeeds begins a new leadership, which another leader's calls may have
// preceded: the Reconciler then counts the values it read meanwhile as
// another leader's and keeps every host busy for a while (Result.Busy).
// With it, a Hold refused while Term is still the value of the last Hold
// that succeeded (a renewal that comes inside the guard's margin) is no
// change of leader, and a success in a new Term is one even if no
// refusal was seen. etcd.Leadership.Guard and kube.LeaseGuard are
// GuardTerms.
type GuardTerm interface {
	Guard
	// Term returns a non-zero identifier of the stretch of leadership
	// this process is in now, or zero if it may not hold the leadership
	// now (lost, released, run out unrenewed, or unknown). It returns the
	// same non-zero value at two moments only if, by this process's
	// clock, the lease was held without a break between them: no other
	// process took it then, within the clock assumption the Guard's Hold
	// makes (A4: another's clock may run fast by up to the guard's
	// margin, so it may take the lease that much before this one's Term
	// reads zero; Hold refuses from then on). A Term that reads zero and
	// then the same value again counts as a new leadership (the cautious
	// reading). It must not block.
	Term() uint64
}

// hold asks g (nil: no fence) before a write or power call described by
// what, and checks the returned context once more right before the call: a
// process paused in between finds it past its deadline. The context it
// returns compares the clock with its deadline at every Err (ClockBound):
// a store that checks it just before it sends refuses after a pause that
// outlasted the lease, even before the deadline's timer fires.
func hold(ctx context.Context, g Guard, what string) (context.Context, context.CancelFunc, error) {
	if g == nil {
		return ctx, func() {}, nil
	}
	gctx, cancel, err := g.Hold(ctx)
	if err != nil {
		if !errors.Is(err, ErrNotLeader) {
			err = fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return ctx, func() {}, fmt.Errorf("%s: %w", what, err)
	}
	// A deadline is a timer, and a process paused past it resumes with
	// the timer not yet fired: compare the clock too (ClockBound).
	gctx = ClockBound(gctx)
	if gctx.Err() != nil {
		cancel()
		return ctx, func() {}, fmt.Errorf("%s: %w: the lease may have ended", what, ErrNotLeader)
	}
	return gctx, cancel, nil
}

// Fenced runs f (one store write or power call) under g as the reconcilers
// do: it asks g first and passes f the bounded context (ClockBound: its
// Err is non-nil once the clock is past its deadline, timer fired or not;
// a pause after f's last check of it can still land one write late unless
// the store fences the write itself). A nil g runs f
// with ctx. Stores and controllers of your own that make extra writes can
// use it too.
func Fenced(ctx context.Context, g Guard, what string, f func(context.Context) error) error {
	gctx, cancel, err := hold(ctx, g, what)
	if err != nil {
		return err
	}
	defer cancel()
	if err := gctx.Err(); err != nil {
		return fmt.Errorf("%s: %w: %w", what, ErrNotLeader, err)
	}
	return f(gctx)
}
