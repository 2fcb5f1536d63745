package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_PruneAfterRestoreOverwritesRunningPlan (review of issue
// 37, round 6, the unproven Low): Prune compared only the header's
// ModRevision with the one it read, not the token of the write. When
// etcd is restored from a backup of its data directory between Prune's
// read and its write (revisions go back and are given again), another
// writer's write can land at the very revision Prune read: here the
// executor's pass that starts two reboots of the plan the restore brought
// back running, at the revision of the cancel Prune had read. Prune's
// compare-and-swap then held, and it wrote the canceled header it read
// (with the time of its end) over the pass's: the plan reads canceled with
// nothing in flight while two servers reboot, nobody watches them, and the
// next Prune after the retention deletes the plan. Ground truth: a fresh
// store's read of the header, and the fake fleet's jobs.
func TestReview37_PruneAfterRestoreOverwritesRunningPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The operator backs up etcd's data directory, then cancels the plan
	// (nothing in flight yet: it ended).
	s := newRestoreRace(t, ctx, "pruned", nil)
	r, pre, uuid, clk := s.r, s.pre, s.uuid, s.clk

	// Between Prune's read of the headers and its write, etcd is restored
	// (the plan running again) and the executor's pass starts two reboots,
	// written at the revision of the cancel.
	pcli, hook := s.hooked("Prune", true)
	_, _ = NewStore(pcli, pre).Prune(ctx, clk.Now(), clk.Now().Add(time.Hour))
	require.Nil(t, hook.before, "etcd was restored between Prune's read and its write")

	truth := func() plan.View {
		v, err := NewStore(r.dial(), pre).GetHead(ctx, uuid)
		require.NoError(t, err)
		return v
	}
	v := truth()
	assert.Equal(t, plan.StateRunning, v.State, "the pass's write stays: the plan runs")
	assert.Len(t, v.Index.InFlight, 2, "the two reboots started are in flight")

	// Later Prunes leave the running plan whole.
	for i := 0; i < 2; i++ {
		clk.Advance(time.Hour)
		_, err := NewStore(r.dial(), pre).Prune(ctx, clk.Now(), clk.Now().Add(time.Hour))
		require.NoError(t, err)
	}
	v = truth()
	assert.Len(t, v.Index.InFlight, 2, "the reboots in flight are still the plan's")
}
