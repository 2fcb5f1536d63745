package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// lockTimedStore times the executor's PutView with the store locked (the
// write alone: EncodeView runs before, as lockedStore.PutView does).
type lockTimedStore struct {
	lockedStore
	locked *time.Duration
	wrote  *int
}

func (s lockTimedStore) PutView(ctx context.Context, v plan.View) error {
	v, err := plan.EncodeView(v)
	if err != nil {
		return err
	}
	return s.with(func(st *plan.BoltStore) error {
		start := time.Now()
		err := st.PutView(ctx, v)
		*s.locked = max(*s.locked, time.Since(start))
		*s.wrote = len(v.Reboots)
		return err
	})
}

// TestReview37q_PutViewHoldsFileForEveryChangedRecord (issue 37 point 1,
// bbolt; review round 15): the README says that at 50 % of 100,000
// servers "a stop lands in well under a second with the executor
// running". The view's read and decoding left the lock, but its write did
// not: a pass in which the 50,000 reboots in flight move a step (they
// were started together: the job queue ends for all of them in the same
// pass) writes 50,000 records in one bbolt transaction with the file
// locked, and a command waits for all of it. Ground truth: how long the
// one PutView held the file.
func TestReview37q_PutViewHoldsFileForEveryChangedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 servers")
	}
	ctx := context.Background()
	const n, flying = 100_000, 50_000
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", fs...)
	p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "big", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Percent(50), CreatedAt: clk.Now()})
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	at := clk.Now()
	for i := 0; i < flying; i++ {
		r := &p.Reboots[i]
		r.Step, r.StepSince, r.JobUUID, r.JobCreatedAt, r.AskedAt = plan.StepJob, &at, plan.JobUUID(p, r.ServerUUID), &at, &at
		require.NoError(t, fleet.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: r.ServerUUID, JobUUID: r.JobUUID, PlanUUID: p.UUID, Drain: true}))
	}
	path := filepath.Join(t.TempDir(), "plans.db")
	bs, err := plan.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, bs.Create(ctx, p))
	require.NoError(t, bs.Close())
	e := &env{ctx: ctx, store: path}
	var locked time.Duration
	var wrote int
	ex := &plan.Executor{Fleet: fleet, Store: lockTimedStore{lockedStore{e}, &locked, &wrote}, Now: clk.Now}
	var worst time.Duration
	for pass := 0; pass < 6; pass++ {
		locked = 0
		_, _ = ex.Pass(ctx, "big")
		t.Logf("pass %d: the write of a view of %d reboots held the file %s", pass, wrote, locked)
		worst = max(worst, locked)
		clk.Advance(5 * time.Second)
	}
	assert.Less(t, worst, time.Second, "one PutView held the store's file for %s: a stop or cancel arriving as it starts waits that long (the issue asks for 1 s at 50 %% of 100,000 servers)", worst)
}
