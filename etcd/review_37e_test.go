package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_RestoredEtcdReusesRevisionStopLost (review 37 round 4): the
// known-header cache takes a header whose ModRevision is the one it knows
// to be the one it holds, and compares nothing else. When etcd is
// restored from a backup of its data directory (its revision goes back),
// the operator's stop written after the restore can land at the very
// revision the executor's own last write had: the executor's store then
// reads the plan as running (GetState, GetView), its pass starts reboots,
// and its PutView's compare-and-swap on that revision succeeds and writes
// "running" over the stop. Before the cache every pass fetched the
// header's value. Ground truth: a fresh store's read of the header.
func TestReview37_RestoredEtcdReusesRevisionStopLost(t *testing.T) {
	r := newRestorable(t)
	dial := r.dial
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitUp := func(cli *clientv3.Client) { r.waitUp(ctx, cli) }
	const pre, uuid = "/r/", "restored"
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, uuid, 10, "")
	opCli := dial()
	require.NoError(t, NewStore(opCli, pre).Create(ctx, runningPlan(t, uuid, fleet.Servers(), 2, clk.Now())))

	// The operator backs up etcd's data directory.
	r.saveBackup()

	exCli := dial()
	waitUp(exCli)
	st := NewStore(exCli, pre)
	ex := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	_, err := ex.Pass(ctx, uuid) // starts two reboots, written at the backup's revision + 1
	require.NoError(t, err)
	require.Len(t, fleet.JobsCreated(), 2)
	started := len(fleet.JobsCreated())

	// etcd is restored from the backup under the running executor.
	r.restoreBackup()
	waitUp(exCli)

	// The operator stops the plan.
	_, err = plan.Command(ctx, NewStore(dial(), pre), uuid, plan.Stop)
	require.NoError(t, err)
	truth := func() plan.State {
		v, err := NewStore(dial(), pre).GetHead(ctx, uuid)
		require.NoError(t, err)
		return v.State
	}
	require.Equal(t, plan.StateStopped, truth())

	state, err := st.GetState(ctx, uuid)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, state, "the executor's store reads the state etcd holds")
	for i := 0; i < 5; i++ {
		clk.Advance(30 * time.Second)
		_, _ = ex.Pass(ctx, uuid)
	}
	assert.Equal(t, plan.StateStopped, truth(), "the operator's stop stays")
	assert.Equal(t, started, len(fleet.JobsCreated()), "no reboot starts after the stop")
}
