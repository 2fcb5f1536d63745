package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_IndexBuiltAfterRestoreLosesRunningPlan (review 37 round
// 7, the index; the revision-only compare round 6 left in buildIndex):
// buildIndex compares each header's ModRevision with the one it read, not
// the token of its write (token.go: "a revision alone no longer tells two
// writes of a plan apart" after a restore). When etcd is restored from a
// backup of its data directory between buildIndex's read and its write,
// another writer's write lands at the very revision it read: here the
// executor's pass that starts two reboots of the plan the restore brought
// back running, at the revision of the cancel buildIndex had read. The
// compare holds, and buildIndex writes the marker with no index key for
// the plan it read ended: the plan runs with two reboots in flight and no
// pass ever looks at it again (Unfinished, and so Leadership.Pass, read
// the index only). Ground truth: a fresh store's GetHead, and the index
// keys read directly.
func TestReview37_IndexBuiltAfterRestoreLosesRunningPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The operator backs up etcd's data directory, then cancels the plan
	// (nothing in flight yet: it ended), on a prefix as a version without
	// the index left it.
	s := newRestoreRace(t, ctx, "lost", func(opCli *clientv3.Client, pre string) {
		_, err := opCli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
		require.NoError(t, err)
	})
	r, pre, uuid := s.r, s.pre, s.uuid

	// The first Unfinished builds the index; between buildIndex's read of
	// the headers and its write, etcd is restored (the plan running again)
	// and the executor's pass starts two reboots, written at the revision
	// of the cancel. (buildIndex's read of the headers is the store's only
	// Get: a committed transaction is no read here.)
	bcli, hook := s.hooked("buildIndex", false)
	_, _ = NewStore(bcli, pre).Unfinished(ctx)
	require.Nil(t, hook.before, "etcd was restored between buildIndex's read and its write")

	cli := r.dial()
	v, err := NewStore(cli, pre).GetHead(ctx, uuid)
	require.NoError(t, err)
	require.Equal(t, plan.StateRunning, v.State, "ground truth: the plan runs")
	require.Len(t, v.Index.InFlight, 2, "ground truth: two reboots in flight")
	uuids, err := NewStore(r.dial(), pre).Unfinished(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{uuid}, uuids, "the passes' list of unfinished plans")
	ix, err := cli.Get(ctx, pre+"unfinished/"+uuid, clientv3.WithKeysOnly())
	require.NoError(t, err)
	assert.Len(t, ix.Kvs, 1, "the index key of the running plan")
}
