package reboot_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40aa_FailedFirstListingStallsUntilResync: a Runner whose
// loops get their keys from Loop.Keys (the README's and examples' way: no
// Runner.Add) lists them at start; if that first listing fails (the
// inventory or store not answering for a moment as the process starts),
// nothing is known, nothing is watched, and the listing is tried again
// only at the next Resync (10 min by default): a fence request or a
// remediation made meanwhile waits ten minutes although the inventory
// answered 100 ms later. The Runner promises back-off retries for what
// fails ("A pass that fails ... runs again after the key's back-off") and
// controller-runtime's guarantees (its informers retry a failed list with
// a back-off); a failed listing is retried at most at Resync.
func TestReview40aa_FailedFirstListingStallsUntilResync(t *testing.T) {
	var lists, passes atomic.Int32
	r := &reboot.Runner{Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(context.Context) ([]string, error) {
			if lists.Add(1) == 1 {
				return nil, errors.New("inventory not answering yet")
			}
			return []string{"h"}, nil
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
	}}}
	stop := runFor(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for passes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("host h was never reconciled within 10 s of a failed first listing (listings tried: %d; the next at Resync, %v)", lists.Load(), reboot.DefaultResync)
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, stop(), context.Canceled)
}

// transitioningWhileOn reads Transitioning whenever the fake reads On (a
// BMC stuck on PoweringOn/PoweringOff while the host runs); every other
// method is the fake's.
type transitioningWhileOn struct{ *fake.Power }

func (s transitioningWhileOn) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil && st == power.StateOn {
		return power.StateTransitioning, nil
	}
	return st, err
}

// TestReview40aa_BareRebootDoneWhileHostNeverOff: a BMC that accepts a
// soft power-off and drops it (fake IgnoreSoft: an OS that ignores the
// ACPI button) and whose readings say Transitioning while the host runs,
// from the controller's first reading on; a pass every 5 s. doc.go lets a
// bare reboot end without an Off reading only "when the Off reading never
// comes (a BMC stuck reading Transitioning while the host is off) and the
// run of Transitioning readings began after that power-off (one under way
// before it shows nothing of it: the power-off is sent again,
// TestReview36z_BareRebootDoneWithoutPowerOff)". Here the run began with
// the first reading, in the pass that sent the power-off, before it; yet
// after SoftTimeout (3m1s) the bare annotation is removed and
// LastPoweredOn written (reboot done) while the hardware (ground truth)
// was never off: the requester is told the host rebooted. Found by
// reboottest's StateMachineStuck on the project's own fake.RebootHosts
// (-rapid.seed=6533287085337170877, failed after 528 tests).
func TestReview40aa_BareRebootDoneWhileHostNeverOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: ""}})
	start := clk.Real()
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power:  func(string) (power.Controller, error) { return transitioningWhileOn{hw}, nil },
		Config: reboot.Config{StaleReads: time.Millisecond}}
	for i := 0; i < 240; i++ { // a pass, one after the wait it asked for, then a pass every 5 s
		res, err := r.Reconcile(ctx, "h")
		if err != nil && !errors.Is(err, reboot.ErrConflict) {
			t.Fatal(err)
		}
		h, gerr := store.Get(ctx, "h")
		require.NoError(t, gerr)
		if _, ok := h.Annotations[reboot.Annotation]; !ok {
			if !hw.WasOffDuring(start, clk.Real()) {
				t.Fatalf("pass %d at %v: the bare reboot's annotation was removed and LastPoweredOn written (%v: reboot done) but the hardware was never off since it was asked (truth %v)",
					i, clk.Real().Sub(start), h.Status.LastPoweredOn, hw.Truth())
			}
			return
		}
		if i == 0 {
			t.Logf("first pass: %s (requeue after %v)", res.Decision.Reason, res.RequeueAfter)
			clk.Advance(res.RequeueAfter)
			continue
		}
		clk.Advance(5 * time.Second)
	}
}
