//go:build e2e

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

// The review-37 end-to-end worlds: 100,000-server plans in a bbolt store
// for the latency tests.

// bigServers is n fake servers, u%06d and cn%06d, whose steps take
// 5-20 s each (a boot a minute).
func bigServers(n int) []fake.FleetServer {
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	return fs
}

// bigStore is the fake fleet of bigServers(n) on a new fake clock, and a
// new bbolt store (its path returned) holding the fleet's running plan
// "big" at concurrency conc, whose first flying reboots are in flight
// (their jobs created at the fleet, with ctx).
func bigStore(t *testing.T, ctx context.Context, n int, conc plan.Limit, flying int) (*fake.Clock, *fake.Fleet, string) {
	t.Helper()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", bigServers(n)...)
	p := newPlan37(t, fleet.Servers(), "big", conc, clk.Now(), true)
	at := clk.Now()
	for i := 0; i < flying; i++ {
		r := &p.Reboots[i]
		r.Step, r.StepSince, r.JobUUID, r.JobCreatedAt, r.AskedAt = plan.StepJob, &at, plan.JobUUID(p, r.ServerUUID), &at, &at
		require.NoError(t, fleet.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: r.ServerUUID, JobUUID: r.JobUUID, PlanUUID: p.UUID, Drain: true}))
	}
	path := filepath.Join(t.TempDir(), "plans.db")
	createStore(t, ctx, path, p)
	return clk, fleet, path
}
