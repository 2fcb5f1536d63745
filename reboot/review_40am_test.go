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

// TestReview40am_UnlistedFailingKeyNeverForgotten: Loop.Keys's doc says
// the Runner "stops watching keys no longer listed". A key whose passes
// keep failing (a server whose BMC is dead, which the operator therefore
// takes out of the inventory) is always scheduled for its back-off retry
// when the resync tick comes (MaxBackoff 2 min < Resync 10 min by
// default), and the tick forgets only keys with nothing due: the
// server, gone from every listing, is reconciled (its dead BMC polled)
// and watched for ever. The operator's way to give up on one server (drop
// it from the inventory) does not work while the fault is on.
func TestReview40am_UnlistedFailingKeyNeverForgotten(t *testing.T) {
	var lists, passes atomic.Int32
	var watchEnded atomic.Bool
	r := &reboot.Runner{Resync: 60 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Loops: []reboot.Loop{{
			Name: "reboot",
			Keys: func(context.Context) ([]string, error) {
				if lists.Add(1) == 1 {
					return []string{"dead"}, nil
				}
				return []string{}, nil // taken out of the inventory
			},
			Reconcile: func(context.Context, string) (reboot.Next, error) {
				passes.Add(1)
				return reboot.Next{}, errors.New("bmc: connection refused")
			},
			Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
				ch := make(chan struct{})
				go func() {
					<-ctx.Done()
					watchEnded.Store(true)
					close(ch)
				}()
				return ch, nil
			},
		}}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	// Many resyncs whose listings no longer hold the key.
	require.Eventually(t, func() bool { return lists.Load() >= 10 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	before := passes.Load()
	time.Sleep(300 * time.Millisecond)
	after := passes.Load()
	require.True(t, watchEnded.Load() && after == before,
		"a key no longer listed for %d listings is still watched (watch ended: %v) and reconciled (%d passes in 300ms)",
		lists.Load(), watchEnded.Load(), after-before)
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestReview40am_RebootLoopNeverForgetsHostLeftInventory: the same with
// the Reconciler's own Loop: a host whose BMC is dead (every power read
// fails) and that the operator takes out of the inventory (Keys no longer
// lists it; its record stays) is read and its dead BMC tried by this
// Runner for ever (every MaxBackoff), against "stops watching keys no
// longer listed".
func TestReview40am_RebootLoopNeverForgetsHostLeftInventory(t *testing.T) {
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var bmcTries atomic.Int32
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now,
		Power: func(string) (power.Controller, error) {
			bmcTries.Add(1)
			return nil, errors.New("bmc: no route to host")
		},
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
	before, tries := passes.Load(), bmcTries.Load()
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, before, passes.Load(),
		"a host no longer listed for %d listings is still reconciled (its dead BMC tried %d times more in 500ms)",
		lists.Load(), bmcTries.Load()-tries)
	require.ErrorIs(t, stop(), context.Canceled)
}
