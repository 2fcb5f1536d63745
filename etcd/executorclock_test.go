package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestExecutorPacesOnItsClock (issue 40, point 9): an Executor whose After
// is a simulated clock's runs a plan that needs hours of that clock (a
// pass a minute, servers that take minutes) in seconds of real time. The
// old Executor waited Interval on real time, whatever clock Now read.
func TestExecutorPacesOnItsClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	world := fleetOf(clk, "c", 3, "")
	store := NewStore(newClient(t), pre)
	require.NoError(t, store.Create(ctx, runningPlan(t, "c", world.Servers(), 1, clk.Now())))
	e := &Executor{Candidate: Candidate{Client: newClient(t), Prefix: pre, ID: "x"}, Fleet: world, Config: cfg29,
		Now: clk.Now, Interval: time.Minute,
		After: func(d time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			ch <- clk.Advance(d)
			return ch
		}}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	start := clk.Real()
	for {
		p, err := store.Get(ctx, "c")
		require.NoError(t, err)
		if p.State == plan.StateComplete {
			break
		}
		require.NoError(t, ctx.Err(), "the plan did not finish in a minute of real time (state %v, %v simulated)", p.State, clk.Real().Sub(start))
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	require.Greater(t, clk.Real().Sub(start), 3*time.Minute, "the plan ran on the simulated clock")
}
