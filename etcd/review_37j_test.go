package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// unindexedPrefix writes, under a fresh prefix, one running plan "live"
// and n finished plans, and deletes the index (as a version without the
// index left it).
func unindexedPrefix(t *testing.T, n int) (string, *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	cli := newClient(t)
	plain := NewStore(cli, pre)
	require.NoError(t, plain.Create(ctx, runningPlan(t, "live", fleetOf(clk, "live", 4, "").Servers(), 2, clk.Now())))
	resp, err := cli.Get(ctx, plain.headerKey("live"))
	require.NoError(t, err)
	var h header
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &h))
	h.Plan.State = plan.StateComplete
	for i := range n {
		h.Plan.UUID = fmt.Sprintf("old%05d", i)
		raw, err := json.Marshal(h)
		require.NoError(t, err)
		_, err = cli.Put(ctx, plain.headerKey(h.Plan.UUID), string(raw))
		require.NoError(t, err)
	}
	_, err = cli.Delete(ctx, pre+"unfinished", clientv3.WithPrefix())
	require.NoError(t, err)
	return pre, cli
}

// TestReview37_ConcurrentIndexBuildsLivelock (issue 37 round 8): after an
// upgrade from a version without the index, every reader (the executor's
// pass, each rebootctl) builds the index. Each build of more than one
// batch rewrites the build key in its first batch and compares it in
// every later one, so two builds at once each make the other fail and
// start again from its first batch: with a few readers at once none
// finishes within readRetries, and every Unfinished (so every pass and
// every Create's check) fails with ErrConflict. The previous version's
// build (no per-batch compare of a shared key) let them all finish.
// Ground truth: every reader should get the one running plan.
func TestReview37_ConcurrentIndexBuildsLivelock(t *testing.T) {
	pre, _ := unindexedPrefix(t, 3000)
	ctx := context.Background()
	const readers = 4
	var wg sync.WaitGroup
	errs := make([]error, readers)
	got := make([][]string, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = NewStore(newClient(t), pre).Unfinished(ctx)
		}()
	}
	wg.Wait()
	for i := range readers {
		if assert.NoError(t, errs[i], "reader %d", i) {
			assert.Equal(t, []string{"live"}, got[i], "reader %d", i)
		}
	}
}

// TestReview37_DryRunClearedOverlaps (issue 37 round 8, etcd): resumeCheck
// runs only for a write taking a plan from ended to unfinished. A dry-run
// plan blocks nothing (plan.CheckOthers skips it), so a real plan may be
// created over its servers; a Command (a header-only write) that then
// clears DryRun on the unfinished dry-run plan makes it hold those
// servers, and nothing checks it. Ground truth: a fresh store's heads.
func TestReview37_DryRunClearedOverlaps(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 6, "").Servers()
	s := NewStore(newClient(t), pre)
	dry, _, err := plan.Create(servers, plan.CreateOptions{UUID: "dry", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(2), CreatedAt: clk.Now(), DryRun: true})
	require.NoError(t, err)
	dry, err = plan.Run(dry)
	require.NoError(t, err)
	require.NoError(t, s.Create(ctx, dry))
	require.NoError(t, s.Create(ctx, runningPlan(t, "real", servers[3:], 2, clk.Now())), "a dry-run plan blocks nothing")

	_, err = plan.Command(ctx, s, "dry", func(p plan.Plan) (plan.Plan, error) {
		p.DryRun = false
		return p, nil
	})
	assert.ErrorIs(t, err, plan.ErrServerInPlan, "clearing DryRun over another plan's servers")

	truth := NewStore(newClient(t), pre)
	var real []string
	for _, uuid := range []string{"dry", "real"} {
		h, err := truth.GetHead(ctx, uuid)
		require.NoError(t, err)
		if h.Unfinished() && !h.DryRun {
			real = append(real, uuid)
		}
	}
	assert.Equal(t, []string{"real"}, real, "ground truth: the unfinished real plans stored")
}
