package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// stateStore is a plan.StateStore whose GetState answers what it is told
// (say), else the stored state, and counts its calls.
type stateStore struct {
	plan.Store
	say   plan.State
	reads int
}

func (s *stateStore) GetState(ctx context.Context, uuid string) (plan.State, error) {
	s.reads++
	if s.say != "" {
		return s.say, nil
	}
	p, err := s.Get(ctx, uuid)
	return p.State, err
}

// TestExecutorReadsStateThroughStateStore (issue 37, point 5): on a
// plan.StateStore the Executor reads the plan's state before every 16
// jobs through GetState (the etcd store answers it without copying the
// header), and creates no job once it says the plan is not running
// (ground truth: the fleet's jobs). Before, the Executor did not know the
// interface and read the whole header (or plan) each time.
func TestExecutorReadsStateThroughStateStore(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", fleetServers(0, 40, time.Minute)...)
	o := opts()
	o.Concurrency = plan.Count(40)
	p, _, err := plan.Create(fleet.Servers(), o)
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	for _, say := range []plan.State{plan.StateStopped, ""} {
		s := &stateStore{Store: fake.NewPlanStore(), say: say}
		require.NoError(t, s.Create(ctx, p))
		before := len(fleet.JobsCreated())
		e := &plan.Executor{Fleet: fleet, Store: s, Now: clk.Now}
		_, err := e.Pass(ctx, p.UUID)
		require.NoError(t, err)
		created := len(fleet.JobsCreated()) - before
		if say == plan.StateStopped {
			require.Equal(t, 1, s.reads, "the state is read before the first job")
			require.Zero(t, created, "jobs created while GetState said stopped")
			continue
		}
		require.Equal(t, 40, created)
		require.Equal(t, 3, s.reads, "one read before every 16 jobs")
	}
}
