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
