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

// prefixBytes counts the keys under pre and the bytes of their keys and
// values, read straight from etcd.
func prefixBytes(t testing.TB, cli *clientv3.Client, pre string) (keys, bytes int) {
	t.Helper()
	resp, err := cli.Get(context.Background(), pre, clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		bytes += len(kv.Key) + len(kv.Value)
	}
	return len(resp.Kvs), bytes
}

// runToEnd runs a leader's passes until plan uuid ended.
func runToEnd(t *testing.T, l *Leadership, fleet *fake.Fleet, clk *fake.Clock, s *Store, uuid string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		require.Less(t, i, 200, "the plan never ended")
		require.NoError(t, l.Pass(ctx, fleet, cfg29, clk.Now, nil))
		h, err := s.GetHead(ctx, uuid)
		require.NoError(t, err)
		if !h.Unfinished() {
			return
		}
		clk.Advance(30 * time.Second)
	}
}

// TestPruneFinishedPlans (issue 37, point 3): a plan that ended is kept
// whole for the retention, then replaced by its summary: its header and
// every page key (staged pages of failed writes included) are deleted, so
// etcd does not fill up with finished plans; List, Unfinished and Get no
// longer read it. The old store never deleted anything.
func TestPruneFinishedPlans(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	clk := fake.NewClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	fleet := fleetOf(clk, "r", 70, "")
	s := NewStore(cli, pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, "r", fleet.Servers(), 10, clk.Now())))
	// A write that died after staging a page.
	_, err := cli.Put(ctx, pre+"pages/r/deadnonce/00000000", "[]")
	require.NoError(t, err)
	l, _ := lead(t, pre, "x", 60)
	runToEnd(t, l, fleet, clk, s, "r")
	keys, before := prefixBytes(t, cli, pre+"pages/")
	hkeys, hbytes := prefixBytes(t, cli, pre+"headers/")
	before += hbytes
	t.Logf("a finished plan of 70 servers: %d keys, %d bytes", keys+hkeys, before)

	retention := 24 * time.Hour
	pruned, err := l.Store.Prune(ctx, clk.Now(), clk.Now().Add(-retention))
	require.NoError(t, err)
	assert.Empty(t, pruned, "first seen ended: kept for the retention")
	clk.Advance(retention - time.Minute)
	pruned, err = l.Store.Prune(ctx, clk.Now(), clk.Now().Add(-retention))
	require.NoError(t, err)
	assert.Empty(t, pruned, "still within the retention")
	got, err := s.Get(ctx, "r")
	require.NoError(t, err)
	require.Len(t, got.Reboots, 70)
	clk.Advance(2 * time.Minute)
	pruned, err = l.Store.Prune(ctx, clk.Now(), clk.Now().Add(-retention))
	require.NoError(t, err)
	assert.Equal(t, []string{"r"}, pruned)

	keys, after := prefixBytes(t, cli, pre+"pages/")
	assert.Zero(t, keys, "page keys left behind")
	keys, _ = prefixBytes(t, cli, pre+"headers/")
	assert.Zero(t, keys)
	_, sum := prefixBytes(t, cli, pre+"summaries/")
	after += sum
	t.Logf("after retention: %d bytes", after)
	_, err = s.Get(ctx, "r")
	require.ErrorIs(t, err, plan.ErrNotFound)
	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	sums, err := s.Summaries(ctx)
	require.NoError(t, err)
	require.Len(t, sums, 1)
	assert.Equal(t, 70, sums[0].Summary.Done)
	assert.Equal(t, plan.StateComplete, sums[0].Plan.State)
}

// TestEndedPlanCachesEvicted (issue 37, point 3): the store's per-plan
// caches (members, pages read) forget a plan when it ends, and List does
// not fill them with finished plans. The old store kept every plan it
// had read, for good.
func TestEndedPlanCachesEvicted(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fleet := fleetOf(clk, "c", 40, "")
	s := NewStore(newClient(t), pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, "c", fleet.Servers(), 10, clk.Now())))
	l, _ := lead(t, pre, "x", 60)
	runToEnd(t, l, fleet, clk, s, "c")
	_, err := l.Store.List(ctx)
	require.NoError(t, err)
	c := l.Store.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.m, "member maps")
	assert.Empty(t, c.loaded, "whole reads")
	assert.Empty(t, c.viewed, "view pages")
}

// TestSweepStagedPages (issue 37, point 3): the staged pages of a write
// that lost (or whose writer died) and overlays no header names are
// deleted by Sweep; the pages the header names, and pages staged after
// the header was written (a write in progress), stay. The old store left
// them for good.
func TestSweepStagedPages(t *testing.T) {
	ctx := context.Background()
	cli := newClient(t)
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	s := NewStore(cli, pre)
	require.NoError(t, s.Create(ctx, runningPlan(t, "w", fleetOf(clk, "w", 70, "").Servers(), 1, clk.Now())))
	_, err := cli.Put(ctx, pre+"pages/w/deadnonce/00000000", "[]")
	require.NoError(t, err)
	h, _, _, err := s.readHeader(ctx, "w")
	require.NoError(t, err)
	_, err = cli.Put(ctx, s.pageKey("w", h.Nonce, 1)+"/lostwrite", "[]")
	require.NoError(t, err)
	// The header is written after them (an operator's stop).
	_, err = plan.Command(ctx, s, "w", plan.Stop)
	require.NoError(t, err)
	// A write in progress stages a page after the header.
	inProgress := s.pageKey("w", h.Nonce, 2) + "/inprogress"
	_, err = cli.Put(ctx, inProgress, "[]")
	require.NoError(t, err)
	n, err := s.Sweep(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	resp, err := cli.Get(ctx, inProgress)
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1, "a write in progress lost its staged page")
	got, err := s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Len(t, got.Reboots, 70)
}
