package reboot_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40_FailedListingForgetsWatchedKeys: Loop.Keys that fails (an
// inventory's listing down, or forbidden) is not "a key no longer listed",
// yet two resyncs with a failed listing make the Runner forget every idle
// key and end its watch: a change of that host, which its (working) watch
// reports, is never reconciled while the listing stays down (liveness with
// the fault still on). The Runner's doc promises wake-ups are acted on and
// that it stops watching only keys "no longer listed".
func TestReview40_FailedListingForgetsWatchedKeys(t *testing.T) {
	var lists, passes atomic.Int32
	change := make(chan struct{})
	r := &reboot.Runner{Resync: 30 * time.Millisecond, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(context.Context) ([]string, error) {
			if lists.Add(1) == 1 {
				return []string{"h"}, nil
			}
			return nil, errors.New("inventory listing unavailable")
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			ch := make(chan struct{}, 1)
			go func() {
				defer close(ch)
				select {
				case <-ctx.Done():
				case <-change:
					ch <- struct{}{}
					<-ctx.Done()
				}
			}()
			return ch, nil
		},
	}}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	// Several resyncs with the listing down.
	require.Eventually(t, func() bool { return lists.Load() >= 5 }, 10*time.Second, 5*time.Millisecond)
	before := passes.Load()
	close(change) // the host's record changes: its watch reports it
	require.Eventually(t, func() bool { return passes.Load() > before }, 3*time.Second, 5*time.Millisecond,
		"a change reported by the host's watch was never reconciled: the Runner forgot the host after failed listings (listings %d)", lists.Load())
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestReview40_AddWaitsForBlockingWatch: Runner.Add's doc says the key is
// "reconciled at once, and watched from now on", but since 5e1c266 a new
// key's first pass waits for the first try of its watch: a Watch that
// does not return (kube.RebootHosts.Watch blocks in the cache's
// GetInformer until the informers sync: a manager not started yet, a
// RebootRecord watch the role forbids) leaves the key unreconciled until
// Resync (10 min by default), although nothing stops a pass.
func TestReview40_AddWaitsForBlockingWatch(t *testing.T) {
	var passes atomic.Int32
	r := &reboot.Runner{Resync: time.Hour, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			<-ctx.Done() // an informer that never syncs
			return nil, ctx.Err()
		},
	}}}
	stop := runFor(t, r)
	require.NoError(t, r.Add("reboot", "h"))
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 3*time.Second, 5*time.Millisecond,
		"Add: the key was not reconciled at once (its first pass waits for a watch that does not return)")
	require.ErrorIs(t, stop(), context.Canceled)
}
