package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40b_SlowListingForgetsListedKeys: Loop.Keys says the Runner
// "stops watching keys no longer listed (a listing that fails forgets no
// key)". A listing that succeeds, and lists the key, but takes longer than
// Resync (an inventory slow for a moment; the listing may take up to
// PassTimeout, 2 min, and Resync may be set below that) is taken as "not
// listed": at the next tick every idle key is forgotten and its watch
// ended, although no listing ever left it out; the late listing then adds
// it again with a new watch. Changes reported in between are lost to the
// watch (only the re-add's pass catches up), and at scale every watch is
// torn down and set up again.
func TestReview40b_SlowListingForgetsListedKeys(t *testing.T) {
	var lists, watches atomic.Int32
	r := &reboot.Runner{Resync: 150 * time.Millisecond, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(ctx context.Context) ([]string, error) {
			if lists.Add(1) == 3 { // one slow listing
				select {
				case <-time.After(400 * time.Millisecond):
				case <-ctx.Done():
				}
			}
			return []string{"h"}, nil
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) { return reboot.Next{}, nil },
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			watches.Add(1)
			ch := make(chan struct{})
			go func() { <-ctx.Done(); close(ch) }()
			return ch, nil
		},
	}}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return lists.Load() >= 8 }, 10*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, stop(), context.Canceled)
	require.Equal(t, int32(1), watches.Load(),
		"key h, in every listing, had its watch ended and set up again (%d watches): a listing slower than Resync counted as not listing it", watches.Load())
}
