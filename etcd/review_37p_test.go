package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// slowObserveFleet: the fleet's observation of one plan answers, but
// takes its time (a real datacenter API observing a plan's reboots in
// flight); it honours its context.
type slowObserveFleet struct {
	*fake.Fleet
	plan string
	took time.Duration
}

func (f slowObserveFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	if v.UUID == f.plan {
		select {
		case <-ctx.Done():
			return plan.Observations{}, ctx.Err()
		case <-time.After(f.took):
		}
	}
	return f.Fleet.ObserveView(ctx, v)
}

// TestReview37p_EqualShareStarvesFirstPlan (issue 37, review round 14;
// "a leader with a live lease makes progress"): Leadership.Pass gives
// each plan "an equal share of the plans left" of what is left of the
// pass, computed before the later plans ran, and never gives the time
// they leave unused back to an earlier plan. Unfinished plans include the
// ones created and not yet run (cheap to pass). With 19 such plans behind
// it, the running plan "a" gets 1/20 of the pass, however little the
// others use: its observation (which answers in 60 ms of a 600 ms pass)
// is cut every pass, and "a" never moves, in 30 passes, while the pass
// as a whole sits mostly idle. The same plan alone moves in its first
// pass. Ground truth: the fake fleet's job creations for "a"'s servers.
func TestReview37p_EqualShareStarvesFirstPlan(t *testing.T) {
	ctx := context.Background()
	{
		// Control: plan a alone moves in its first pass.
		clk := fake.NewClock(time.Time{})
		fleet := fake.NewFleet(clk.Now, "", fake.FleetServer{UUID: "c-u0", Hostname: "c-cn0", Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second})
		l, _ := lead(t, prefix(t)+"control/", "leader", 5)
		require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", fleet.Servers(), 1, clk.Now())))
		pctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		_ = l.Pass(pctx, slowObserveFleet{fleet, "a", 60 * time.Millisecond}, cfg29, clk.Now, nil)
		cancel()
		require.Equal(t, 1, fleet.JobsCreated()["c-u0"], "control: plan a alone moves in one pass")
	}
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const created = 19
	fs := make([]fake.FleetServer, 4+created)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("q-u%05d", i), Hostname: fmt.Sprintf("q-cn%05d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	fleet := fake.NewFleet(clk.Now, "", fs...)
	servers := fleet.Servers()
	l, _ := lead(t, pre, "leader", 5)
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", servers[:4], 2, clk.Now())))
	for k := 0; k < created; k++ {
		// Created, not run yet (e.g. one plan per rack, run one by one).
		p, _, err := plan.Create(servers[4+k:5+k], plan.CreateOptions{UUID: fmt.Sprintf("z%02d", k), Target: "2",
			Select: plan.SelectAll, Concurrency: plan.Count(1), CreatedAt: clk.Now()})
		require.NoError(t, err)
		require.NoError(t, l.Store.Create(ctx, p))
	}
	sf := slowObserveFleet{fleet, "a", 60 * time.Millisecond}
	var longest time.Duration
	for i := 0; i < 30; i++ {
		pctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		start := time.Now()
		_ = l.Pass(pctx, sf, cfg29, clk.Now, nil)
		longest = max(longest, time.Since(start))
		cancel()
		clk.Advance(time.Minute)
	}
	n := 0
	for _, s := range fs[:4] {
		n += fleet.JobsCreated()[s.UUID]
	}
	a, err := l.Store.Get(ctx, "a")
	require.NoError(t, err)
	t.Logf("longest pass %s of 600 ms; jobs created for plan a: %d", longest, n)
	assert.Positive(t, n, "in 30 passes of 600 ms (the longest took %s), plan a, whose observation answers in 60 ms, never moved:\n%s", longest, plan.Table(a))
}
