//go:build e2e

package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// countingLocked is the executor's store (lockedStore), counting the
// whole-plan reads; it has the same methods, so the plan's Executor
// treats it alike.
type countingLocked struct {
	lockedStore
	gets *int
}

func (s countingLocked) Get(ctx context.Context, uuid string) (plan.Plan, error) {
	*s.gets++
	return s.lockedStore.Get(ctx, uuid)
}

// TestReview37o_ExecutorStoreReadsWholePlanEvery16Jobs (issue 37, review
// round 13): the Executor reads the plan's state before every 16 jobs
// it creates "its state alone on a StateStore, the header alone on a
// HeadStore" (plan.Executor.Pass), and BoltStore is a HeadStore; but
// rebootctl's executor passes it through lockedStore, which is a
// ViewStore only, so each of those reads is a whole-plan Get: every
// record of the plan decoded (O(servers)) every 16 jobs. At 20,000
// servers and 5 %, the first pass creates 1,000 jobs and reads the whole
// plan 63 times; at 100,000 servers the same pass (5,000 jobs, 313 whole
// reads) did not end in 9 minutes. Ground truth: the calls counted, and
// the pass's time against the same pass on the BoltStore itself
// (logged).
func TestReview37o_ExecutorStoreReadsWholePlanEvery16Jobs(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 servers")
	}
	const n = 20_000
	ctx := context.Background()
	fs := bigServers(n)
	pass := func(direct bool) (time.Duration, int, int) {
		clk := fake.NewClock(time.Time{})
		fleet := fake.NewFleet(clk.Now, "", fs...)
		p := newPlan37(t, fleet.Servers(), "big", plan.Count(n/20), clk.Now(), true)
		path := filepath.Join(t.TempDir(), "plans.db")
		bs, err := plan.OpenBolt(path)
		require.NoError(t, err)
		require.NoError(t, bs.Create(ctx, p))
		gets := 0
		var store plan.Store = countingLocked{lockedStore{&env{ctx: ctx, store: path}}, &gets}
		if direct {
			store = bs
		} else {
			require.NoError(t, bs.Close())
		}
		ex := &plan.Executor{Fleet: fleet, Store: store, Now: clk.Now}
		start := time.Now()
		_, err = ex.Pass(ctx, "big")
		took := time.Since(start)
		require.NoError(t, err)
		if direct {
			require.NoError(t, bs.Close())
		}
		jobs := 0
		for _, c := range fleet.JobsCreated() {
			jobs += c
		}
		return took, gets, jobs
	}
	dt, _, djobs := pass(true)
	lt, gets, ljobs := pass(false)
	t.Logf("first pass at 5 %% of %d servers: BoltStore %s (%d jobs); rebootctl's lockedStore %s (%d jobs, %d whole-plan reads)", n, dt, djobs, lt, ljobs, gets)
	assert.Zero(t, gets, "a pass through rebootctl's store read the whole plan %d times (%s, against %s on the BoltStore)", gets, lt, dt)
}

// TestReview37o_StopWaitsForWholePlanReads (issue 37 point 1, the bbolt
// store, review round 13): "rebootctl plan stop" must land within a
// second at 100,000 servers with the executor running. The executor's
// store (lockedStore) opens the bbolt file, and so holds its lock, for
// each read, and its pass reads the whole plan before every 16 jobs
// (TestReview37o_ExecutorStoreReadsWholePlanEvery16Jobs), back to back:
// the operator's command (openStore, then a header-only Command) waits
// for those reads. Ground truth: the stop's wall time, and the plan read
// back stopped.
func TestReview37o_StopWaitsForWholePlanReads(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 servers")
	}
	skipLatencyUnderRace(t)
	const n = 100_000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk, fleet, path := bigStore(t, ctx, n, plan.Count(n/20), 0)
	e := &env{ctx: ctx, store: path}
	// Control: the same command with no executor running.
	quiet := time.Now()
	st0, err := e.openStore()
	require.NoError(t, err)
	_, err = plan.CommandView(ctx, st0, "big", plan.Run)
	require.NoError(t, err)
	st0.Close()
	idle := time.Since(quiet)
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = ex.Pass(ctx, "big")
	}()
	// The pass is creating jobs.
	for deadline := time.Now().Add(5 * time.Minute); len(fleet.JobsCreated()) == 0; {
		require.True(t, time.Now().Before(deadline), "the pass created no job in 5 minutes")
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	start := time.Now()
	st, err := e.openStore()
	var cerr error
	if err == nil {
		_, cerr = plan.CommandView(ctx, st, "big", plan.Stop)
		st.Close()
	}
	took := time.Since(start)
	cancel()
	<-done
	require.NoError(t, err, "the operator's store open (after %s)", took)
	require.NoError(t, cerr)
	t.Logf("stop landed after %s with the executor's pass running (%d jobs created); a command with no executor: %s", took, len(fleet.JobsCreated()), idle)
	assert.Less(t, took, time.Second, "stop took %s to land on a 100,000-server plan while the executor ran", took)
}
