package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// shareStore gives store and its directory to owner and group: the
// directory dirMode, the store 0660, the directory above open to all
// (0755) so that every user reaches it.
func shareStore(t *testing.T, store string, owner, group int, dirMode os.FileMode) {
	t.Helper()
	dir := filepath.Dir(store)
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, owner, group))
	require.NoError(t, os.Chmod(dir, dirMode))
	require.NoError(t, os.Chown(store, owner, group))
	require.NoError(t, os.Chmod(store, 0o660))
}

// twoPlanWorld is the fake fleet of six servers and a bbolt store holding
// two running plans at concurrency 3, p1 of u000-u002 and p2 of
// u003-u005, shared (shareStore) by the service user svc with its
// operators' group ops in a directory others may enter (svc:ops 0775);
// the env's messages go to a buffer.
func twoPlanWorld(t *testing.T, svc, ops int) (*env, *fake.Fleet, *fake.Clock) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", quickServers(6, "%03d")...)
	p1 := newPlan37(t, fleet.Servers()[0:3], "p1", plan.Count(3), clk.Now(), true)
	p2 := newPlan37(t, fleet.Servers()[3:6], "p2", plan.Count(3), clk.Now(), true)
	path := filepath.Join(t.TempDir(), "plans.db")
	createStore(t, ctx, path, p1, p2)
	e := &env{ctx: ctx, store: path, errw: &bytes.Buffer{}}
	shareStore(t, e.store, svc, ops, 0o775)
	return e, fleet, clk
}

// executorOpenAs opens e's store once as the executor of user uid:gid
// does (lockedStore.with, with an env of its own), and returns what that
// executor said.
func executorOpenAs(t *testing.T, e *env, uid, gid int) *bytes.Buffer {
	t.Helper()
	var log bytes.Buffer
	asUser(t, uid, gid, []int{}, func() {
		ex := &env{ctx: e.ctx, store: e.store, errw: &log}
		require.NoError(t, lockedStore{ex}.with(func(*plan.BoltStore) error { return nil }))
	})
	return &log
}

// requireOneUnmarked checks that store's FILE.commands holds one record,
// not marked applied (its applier could not rewrite the file).
func requireOneUnmarked(t *testing.T, store string) {
	t.Helper()
	c, err := readCmdFile(store)
	require.NoError(t, err)
	require.Len(t, c.Records, 1)
	require.False(t, c.Records[0].Applied, "the service user could not rewrite the side file")
}

// unmarkedRunWorld is review37sWorld's store (p1 of three servers,
// running; the env's messages to a buffer), shared (shareStore) by the
// service user svc with its operators' group ops in a directory others
// may enter (0775), where root's `plan run p1` was recorded (sudo
// rebootctl plan run p1, interrupted), then applied by the next open of
// the service executor (svc:nogroup), which could not rewrite the side
// file; it returns what that executor said.
func unmarkedRunWorld(t *testing.T, svc, nogroup, ops int) (*env, *bytes.Buffer) {
	t.Helper()
	e, _, _ := review37sWorld(t, 3)
	e.errw = &bytes.Buffer{}
	shareStore(t, e.store, svc, ops, 0o775)
	_, err := recordCommand(e.ctx, e.store, "p1", "run", time.Now().UTC())
	require.NoError(t, err)
	return e, executorOpenAs(t, e, svc, nogroup)
}
