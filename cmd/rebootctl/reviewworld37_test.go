package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// The review-37 worlds: a fake fleet on a fake clock, its plans in a
// bbolt store of their own, and the store shared with a group or kept in
// a directory others may write.

// quickServers is n fake servers, u<i> and cn<i> with i written by
// format (e.g. "%03d"), whose steps take a second each (a boot a minute).
func quickServers(n int, format string) []fake.FleetServer {
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u"+format, i), Hostname: fmt.Sprintf("cn"+format, i), Platform: "1",
			Queue: time.Second, Drain: time.Second, Shutdown: time.Second, Boot: time.Minute, Services: time.Second}
	}
	return fs
}

// newPlan37 is plan uuid of every one of servers at concurrency conc,
// created at now, and run when run is set.
func newPlan37(t *testing.T, servers []plan.Server, uuid string, conc plan.Limit, now time.Time, run bool) plan.Plan {
	t.Helper()
	p, _, err := plan.Create(servers, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll,
		Concurrency: conc, CreatedAt: now})
	require.NoError(t, err)
	if run {
		p, err = plan.Run(p)
		require.NoError(t, err)
	}
	return p
}

// createStore makes path a bbolt store holding ps, and closes it.
func createStore(t *testing.T, ctx context.Context, path string, ps ...plan.Plan) {
	t.Helper()
	bs, err := plan.OpenBolt(path)
	require.NoError(t, err)
	for _, p := range ps {
		require.NoError(t, bs.Create(ctx, p))
	}
	require.NoError(t, bs.Close())
}

// storeWorld is the fake fleet of fs (shard primary shard, "" for none)
// on a new fake clock, and a new bbolt store (plans.db in a directory of
// the test's) holding one running plan p1 of every server at concurrency
// conc.
func storeWorld(t *testing.T, fs []fake.FleetServer, conc plan.Limit, shard string) (*env, *fake.Fleet, *fake.Clock) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, shard, fs...)
	p := newPlan37(t, fleet.Servers(), "p1", conc, clk.Now(), true)
	path := filepath.Join(t.TempDir(), "plans.db")
	createStore(t, ctx, path, p)
	return &env{ctx: ctx, store: path}, fleet, clk
}
