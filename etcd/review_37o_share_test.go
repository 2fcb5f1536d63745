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

// hangingObserveFleet: the fleet's observation of one plan never answers
// (it returns only when the caller gives up), e.g. an inventory call stuck
// behind that plan's dead datacenter API.
type hangingObserveFleet struct {
	*fake.Fleet
	plan string
}

func (f hangingObserveFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	if v.UUID == f.plan {
		<-ctx.Done()
		return plan.Observations{}, ctx.Err()
	}
	return f.Fleet.ObserveView(ctx, v)
}

// TestReview37o_EachPlanHasItsShareOfThePass (issue 37, review round 13,
// the per-plan budget of Leadership.Pass; liveness with the fault kept
// on): plan "a"'s observation hangs for ever, and it comes first in every
// pass. Plan "b", whose 20 servers share nothing with "a", gets its own
// share of the pass and is rebooted whole in an hour. One context for
// the whole pass gave "a" all of it: "b" never passed. Ground truth: the
// fake fleet's job creations.
func TestReview37o_EachPlanHasItsShareOfThePass(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, 24)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("o-u%05d", i), Hostname: fmt.Sprintf("o-cn%05d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	fleet := fake.NewFleet(clk.Now, "", fs...)
	servers := fleet.Servers()
	l, _ := lead(t, pre, "leader", 5)
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", servers[:4], 2, clk.Now())))
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "b", servers[4:], 2, clk.Now())))
	hf := hangingObserveFleet{fleet, "a"}
	for i := 0; i < 60; i++ {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_ = l.Pass(pctx, hf, cfg29, clk.Now, nil)
		cancel()
		clk.Advance(time.Minute)
	}
	created := fleet.JobsCreated()
	var never []string
	for _, s := range fs[4:] {
		if created[s.UUID] == 0 {
			never = append(never, s.Hostname)
		}
	}
	b, err := l.Store.Get(ctx, "b")
	require.NoError(t, err)
	assert.Empty(t, never, "in an hour, while plan a's observation hangs, these servers of plan b were never rebooted:\n%s", plan.Table(b))
	assert.Equal(t, plan.StateComplete, b.State, "%s", plan.Table(b))
}
