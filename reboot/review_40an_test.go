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

// TestReview40an_UnlistedHostLeftOffAfterOneFailedPowerOn: round 35's fix
// keeps an unlisted key "whose last pass succeeded and asked to come back
// (Requeue, After: work under way)", so that "dropping a host from the
// listing mid-reboot does not leave it off". But the Reconciler's Loop
// reports a failed power call as a pass that succeeded and asks to Requeue
// (Next{Requeue: true}, nil error), and the Runner counts a Requeue as a
// failure (keyState.failures++): one refused power-on of a fenced host,
// released by its fencer after the operator dropped it from the
// inventory, and the next resync tick forgets the key (its watch ends, its
// retry is dropped) before the retry comes (MinBackoff; with a store that
// has no watch, nothing else wakes the key first). The host stays powered off for good: nothing ever
// powers it on again. Judged by the fake hardware's truth.
func TestReview40an_UnlistedHostLeftOffAfterOneFailedPowerOn(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	// A store without a watch (Loop.Watch nil: "changes are seen at the
	// next RequeueAfter or Resync").
	rec := &reboot.Reconciler{Hosts: struct{ reboot.HostStore }{store}, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, RetryDelay: 500 * time.Millisecond}}
	var dropped atomic.Bool
	l := rec.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{}, nil // taken out of the inventory mid-reboot
		}
		return []string{"h"}, nil
	})
	// A retry of a failed pass comes MinBackoff (1 s) later: several
	// resync ticks (100 ms) come first.
	r := &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}}
	runFor(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	require.True(t, hw.WasOffDuring(tk.At, time.Now()), "setup: fenced")
	// The operator drops the host from the inventory while it is held off;
	// the first power-on after the release is refused once (a busy BMC).
	dropped.Store(true)
	time.Sleep(250 * time.Millisecond) // a listing without it is in
	hw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultBusy})
	require.NoError(t, cl.Release(ctx, tk))
	deadline := time.Now().Add(8 * time.Second) // MinBackoff is 1 s
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(),
		"a fenced host released while unlisted, its first power-on refused once, is still off 8 s later (power calls: %v): the Runner forgot its key (a Requeue counts as a failure) and nothing powers it on again",
		hw.Calls())
}

// failOnce is the Reconciler's view of a watched store whose next Update
// fails once armed (a store error for a moment).
type failOnce struct {
	*fake.RebootHosts
	armed atomic.Bool
}

func (f *failOnce) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	if f.armed.CompareAndSwap(true, false) {
		return reboot.Host{}, errors.New("store: unavailable")
	}
	return f.RebootHosts.Update(ctx, h)
}

// TestReview40an_UnlistedHostLeftOffAfterOneStoreError: the same with a
// store that watches (the default wiring): the operator drops a fenced
// host from the inventory; once its fencer releases it, the Reconciler's
// pass fails once (a status write refused by the store for a moment).
// The Runner counts the failure and, at the next resync tick, forgets the
// key ("one whose passes fail is forgotten even with a retry due"): its
// retry is dropped and its watch ends, and the host, released, stays off
// for good. A single transient store error mid-reboot leaves a server off.
func TestReview40an_UnlistedHostLeftOffAfterOneStoreError(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	view := &failOnce{RebootHosts: store}
	rec := &reboot.Reconciler{Hosts: view, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, RetryDelay: 500 * time.Millisecond}}
	var dropped atomic.Bool
	l := rec.Loop(func(context.Context) ([]string, error) {
		if dropped.Load() {
			return []string{}, nil
		}
		return []string{"h"}, nil
	})
	require.NotNil(t, l.Watch, "setup: the store watches")
	r := &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
		Loops: []reboot.Loop{l}}
	runFor(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	require.NoError(t, cl.WaitFenced(ctx, tk))
	require.True(t, hw.WasOffDuring(tk.At, time.Now()), "setup: fenced")
	dropped.Store(true)
	time.Sleep(250 * time.Millisecond) // a listing without it is in
	view.armed.Store(true)
	require.NoError(t, cl.Release(ctx, tk))
	deadline := time.Now().Add(8 * time.Second) // MinBackoff is 1 s
	for !hw.HardwareOn() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(),
		"a fenced host released while unlisted, one status write of its Reconciler refused, is still off 8 s later (store error consumed: %v): the Runner forgot its key and nothing powers it on again",
		!view.armed.Load())
}

// TestReview40an_UnlistedDeadBMCHostNeverForgotten: round 35's finding
// (TestReview40am_RebootLoopNeverForgetsHostLeftInventory) is fixed only
// for a Power factory that fails. A dead BMC whose every call fails (reads
// time out) makes the Reconciler's pass succeed with RequeueAfter (power
// state unknown: wait, PollInterval), so the Runner never counts a
// failure and always has a pass due at the tick: the idle host (no
// request, no work under way), taken out of the inventory because its BMC
// is dead, is read (its dead BMC polled) and watched for ever, against
// Loop.Keys "forgets the keys the latest listing no longer holds".
func TestReview40an_UnlistedDeadBMCHostNeverForgotten(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{
		Faults: func(fake.Call) fake.Fault { return fake.Fault{Kind: fake.FaultTimeout} }})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now,
		Power: func(string) (power.Controller, error) { return hw, nil },
		// LostLanding and SoftTimeout short: a Reconciler keeps every host
		// busy for LostLanding + 2x SoftTimeout + StaleReads after its start
		// (another process's lost call may land: othersMayLand); the host is
		// let go after that.
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond, PollInterval: 30 * time.Millisecond,
			SoftTimeout: 100 * time.Millisecond, LostLanding: 100 * time.Millisecond}}
	var lists, passes atomic.Int32
	l := rb.Loop(func(context.Context) ([]string, error) {
		if lists.Add(1) == 1 {
			return []string{"h"}, nil
		}
		return []string{}, nil // taken out of the inventory
	})
	inner := l.Reconcile
	l.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		passes.Add(1)
		return inner(ctx, k)
	}
	r := &reboot.Runner{Resync: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Loops: []reboot.Loop{l}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	require.Eventually(t, func() bool { return lists.Load() >= 8 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	before, calls := passes.Load(), len(hw.Calls())
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, before, passes.Load(),
		"an idle host whose BMC is dead, no longer listed for %d listings, is still reconciled (its dead BMC called %d times more in 500ms)",
		lists.Load(), len(hw.Calls())-calls)
	require.ErrorIs(t, stop(), context.Canceled)
}
