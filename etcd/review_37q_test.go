package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37q_LongPassNeverMovesBesideCheapPlan (issue 37 point 2,
// review round 15): Leadership.Pass says "a plan whose pass needs more
// than its share still moves" (plan.Turns: "the time later plans leave
// unused goes back to the plans cut short"). But a plan cut short gets
// that time back only as a second, fresh pass (plan.Turns.Run's second
// round re-runs the whole pass from its read), and its long turn is half
// of the pass whenever another plan acts. Plan "a", whose observation
// answers in 360 ms of a 600 ms pass, beside a running plan "b" whose
// pass takes a few ms, gets 300 ms in the first round (cut), then the
// ~270 ms left in the second (cut again): it never moves, in 10 passes,
// although a's pass and b's together fit the pass with room to spare and
// a alone moves in its first pass. Ground truth: the fake fleet's job
// creations for a's servers.
func TestReview37q_LongPassNeverMovesBesideCheapPlan(t *testing.T) {
	ctx := context.Background()
	const need, pass = 360 * time.Millisecond, 600 * time.Millisecond
	srv := func(u string, boot time.Duration) fake.FleetServer {
		return fake.FleetServer{UUID: u, Hostname: "h-" + u, Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: boot, Services: 20 * time.Second}
	}
	{
		// Control: plan a alone moves in its first pass.
		clk := fake.NewClock(time.Time{})
		fleet := fake.NewFleet(clk.Now, "", srv("c-u0", time.Minute))
		l, _ := lead(t, prefix(t)+"control/", "leader", 5)
		require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", fleet.Servers(), 1, clk.Now())))
		pctx, cancel := context.WithTimeout(ctx, pass)
		_ = l.Pass(pctx, slowObserveFleet{fleet, "a", need}, cfg29, clk.Now, nil)
		cancel()
		require.Equal(t, 1, fleet.JobsCreated()["c-u0"], "control: plan a alone moves in one pass")
	}
	clk := fake.NewClock(time.Time{})
	// b's one server stays in flight (a long boot): b acts every pass.
	fleet := fake.NewFleet(clk.Now, "", srv("q-u0", time.Minute), srv("q-u1", time.Minute), srv("q-b0", 1000*time.Hour))
	servers := fleet.Servers()
	l, _ := lead(t, prefix(t), "leader", 5)
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", servers[:2], 2, clk.Now())))
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "b", servers[2:], 1, clk.Now())))
	sf := slowObserveFleet{fleet, "a", need}
	var longest time.Duration
	for i := 0; i < 10; i++ {
		pctx, cancel := context.WithTimeout(ctx, pass)
		start := time.Now()
		_ = l.Pass(pctx, sf, cfg29, clk.Now, nil)
		longest = max(longest, time.Since(start))
		cancel()
		clk.Advance(time.Minute)
	}
	require.Equal(t, 1, fleet.JobsCreated()["q-b0"], "plan b ran (its reboot is in flight)")
	n := fleet.JobsCreated()["q-u0"] + fleet.JobsCreated()["q-u1"]
	a, err := l.Store.Get(ctx, "a")
	require.NoError(t, err)
	t.Logf("longest pass %s of %s; jobs created for plan a: %d", longest, pass, n)
	assert.Positive(t, n, "in 10 passes of %s, plan a, whose pass needs %s, never moved beside plan b (a few ms):\n%s", pass, need, plan.Table(a))
}
