package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_DeposedLeaderBuildsIndex (review 37 round 7, the index):
// doc.go says the Leadership's Store "adds to every write a comparison of
// the election key it holds ... so an executor that lost its lease can
// never write or delete again", and "a deposed one never writes again".
// buildIndex (index.go), run by the first Unfinished (Pass, Maintain) of
// a prefix without the index marker, writes the marker and the index keys
// in transactions whose If holds only its own comparisons, never s.guard:
// a store whose guard fails writes them all the same. Ground truth: the
// keys under PREFIX unfinished, read directly.
func TestReview37_DeposedLeaderBuildsIndex(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "unindexed"
	cli := newClient(t)
	require.NoError(t, NewStore(cli, pre).Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))
	// A prefix as a version without the index left it: no marker, no key.
	_, err := cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
	require.NoError(t, err)

	// The election key it held is gone: its guard fails.
	deposed := NewStore(newClient(t), pre).Guarded(clientv3.Compare(clientv3.CreateRevision(pre+"election/gone"), ">", 0))
	_, uerr := deposed.Unfinished(ctx)

	resp, err := cli.Get(ctx, pre+"unfinished", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var written []string
	for _, kv := range resp.Kvs {
		written = append(written, string(kv.Key))
	}
	assert.Empty(t, written, "keys a deposed leader's Unfinished wrote (its error: %v)", uerr)
}

// TestReview37_ResumedPlanPrunedWithoutRetention (review 37 round 7,
// retention): Prune records in the header when it first saw a plan ended
// (header.Ended) and prunes it once that is older than the retention.
// Every later write keeps the recorded end (writeRev: h.Ended =
// old.Ended), also the write that makes the plan unfinished again (a
// Put/Edit of an ended plan, which round 6 made possible: a tool setting
// a finished plan running again; indexOps puts it back in the index), and
// Prune never clears it. When the plan ends again, Prune takes the first
// end as its end: a plan that ended a moment ago is pruned at once, its
// reboot records deleted without the retention the operator set ("a plan
// is kept whole for at least olderThan's distance from now after it
// ended"). Ground truth: the header key, read directly.
func TestReview37_ResumedPlanPrunedWithoutRetention(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	const uuid = "resumed"
	const retention = 7 * 24 * time.Hour
	cli := newClient(t)
	s := NewStore(cli, pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 4, "").Servers(), 2, clk.Now())))

	// Ended (canceled, nothing in flight); Prune records when.
	_, err := plan.Command(ctx, s, uuid, plan.Cancel)
	require.NoError(t, err)
	pruned, err := s.Prune(ctx, clk.Now(), clk.Now().Add(-retention))
	require.NoError(t, err)
	require.Empty(t, pruned)

	// A tool sets it running again (Edit: the whole plan, Put).
	clk.Advance(time.Hour)
	_, err = plan.Edit(ctx, s, uuid, func(p plan.Plan) (plan.Plan, error) {
		p.State = plan.StateRunning
		return p, nil
	})
	require.NoError(t, err)
	hv, err := NewStore(newClient(t), pre).GetHead(ctx, uuid)
	require.NoError(t, err)
	require.True(t, hv.Unfinished(), "the plan runs again")

	// It runs for 8 days, then ends again, now.
	clk.Advance(8 * 24 * time.Hour)
	_, err = plan.Command(ctx, s, uuid, plan.Cancel)
	require.NoError(t, err)
	endedAt := clk.Now()
	pruned, err = s.Prune(ctx, endedAt, endedAt.Add(-retention))
	require.NoError(t, err)
	pruned2, err := s.Prune(ctx, endedAt.Add(time.Minute), endedAt.Add(time.Minute-retention))
	require.NoError(t, err)

	resp, err := cli.Get(ctx, s.headerKey(uuid), clientv3.WithKeysOnly())
	require.NoError(t, err)
	assert.Empty(t, append(pruned, pruned2...), "plans pruned a minute after they ended, with a retention of %v", retention)
	assert.Len(t, resp.Kvs, 1, "ground truth: the header of a plan that ended a minute ago is still stored")
	if len(resp.Kvs) == 0 {
		_, err := NewStore(newClient(t), pre).Get(ctx, uuid)
		assert.False(t, errors.Is(err, plan.ErrNotFound), "its reboot records are gone: %v", err)
	}
}

// TestReview37_IndexBuiltWithEndedPlan (review 37 round 7, the index):
// buildIndex compares, in its transaction, that every header it read is
// unchanged (ModRevision) only while they fit one transaction: with more
// than maxTxnOps-1 retained plans (a prefix an older version filled with
// finished plans, which it never deleted) it keeps only the comparison
// that no header was created, so a plan that ends between buildIndex's
// read and its write is put in the index after the write that ended it.
// Nothing deletes that key but Prune (indexOps deletes it only on the
// write that ends the plan): for the whole retention the index names a
// plan that ended, against "deleted by the write that ends it" and
// "Unfinished ... never a retained ended plan" (every pass and every
// Create's check reads its header again). Ground truth: the index key,
// read directly, and the header's state.
func TestReview37_IndexBuiltWithEndedPlan(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	cli := newClient(t)
	plain := NewStore(cli, pre)
	require.NoError(t, plain.Create(ctx, runningPlan(t, "ender", fleetOf(clk, "ender", 4, "").Servers(), 2, clk.Now())))
	require.NoError(t, plain.Create(ctx, runningPlan(t, "live", fleetOf(clk, "live", 4, "").Servers(), 2, clk.Now())))
	// 130 finished plans an older version kept (headers only: buildIndex
	// reads nothing else).
	resp, err := cli.Get(ctx, plain.headerKey("live"))
	require.NoError(t, err)
	var h header
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &h))
	h.Plan.State = plan.StateComplete
	for i := range 130 {
		uuid := fmt.Sprintf("old%03d", i)
		h.Plan.UUID = uuid
		raw, err := json.Marshal(h)
		require.NoError(t, err)
		_, err = cli.Put(ctx, plain.headerKey(uuid), string(raw))
		require.NoError(t, err)
	}
	// No index yet (a prefix written by a version without it).
	_, err = cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
	require.NoError(t, err)

	// "ender" is canceled (nothing in flight: it ends) by an operator right
	// after buildIndex read the headers.
	var armed, done bool
	var cmdErr error
	hooked := hookClient(t, func(req any) error {
		if done {
			return nil
		}
		if r, ok := req.(*pb.RangeRequest); ok && string(r.Key) == plain.headersPrefix() {
			armed = true
			return nil
		}
		if armed {
			done = true
			_, cmdErr = plan.Command(ctx, NewStore(newClient(t), pre), "ender", plan.Cancel)
		}
		return nil
	}, nil)
	uuids, err := NewStore(hooked, pre).Unfinished(ctx)
	require.NoError(t, err)
	require.True(t, done, "buildIndex ran")
	require.NoError(t, cmdErr)

	hv, err := NewStore(newClient(t), pre).GetHead(ctx, "ender")
	require.NoError(t, err)
	require.False(t, hv.Unfinished(), "ground truth: ender ended")
	assert.Equal(t, []string{"live"}, uuids)
	ix, err := cli.Get(ctx, plain.indexKey("ender"), clientv3.WithKeysOnly())
	require.NoError(t, err)
	assert.Empty(t, ix.Kvs, "the index names a plan that ended before the index was written")
}

// TestReview37_ResumedEndedPlanOverlapsNewPlan (review 37 round 7, the
// index and Put of an ended plan): a Put (Edit) or PutHead (Command with
// a header change) of a plan that ended may make it unfinished again
// (indexOps puts it back in the index), but neither checks the other
// unfinished plans as Create does: once the ended plan's servers are in a
// new plan, setting the old one running gives two unfinished plans over
// the same servers (each running its own concurrency over them), which
// Create refuses (plan.ErrServerInPlan) and doc.go says cannot both
// succeed. Ground truth: a fresh store's Unfinished and GetHead.
func TestReview37_ResumedEndedPlanOverlapsNewPlan(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 6, "").Servers()
	s := NewStore(newClient(t), pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, "old", servers, 2, clk.Now())))
	_, err := plan.Command(ctx, s, "old", plan.Cancel)
	require.NoError(t, err)
	require.NoError(t, s.Create(ctx, runningPlan(t, "new", servers, 2, clk.Now())), "the old plan ended: its servers are free")

	_, err = plan.Command(ctx, s, "old", func(p plan.Plan) (plan.Plan, error) {
		p.State = plan.StateRunning
		return p, nil
	})
	t.Logf("setting the ended plan running: %v", err)

	truth := NewStore(newClient(t), pre)
	uuids, err := truth.Unfinished(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, []string{"new", "old"}, uuids, "two unfinished plans over the same servers")
}
