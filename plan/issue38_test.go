package plan_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// refusingServerFleet creates every job asked for but those of the servers in
// refuse (a fleet still reconciling a dead BMC's power cycle, or a server
// the operator abandoned); its servers are up and its jobs never start.
type refusingServerFleet struct {
	refuse  map[string]bool
	jobs    map[string]bool
	created []string
}

func (f *refusingServerFleet) Observe(_ context.Context, p plan.Plan) (plan.Observations, error) {
	obs := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}, HeadnodeServicesUp: true, ShardHealthy: true}
	for _, r := range p.Reboots {
		obs.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
		if f.jobs[r.JobUUID] {
			obs.Jobs[r.JobUUID] = plan.JobObs{Exists: true}
		}
	}
	return obs, nil
}

func (f *refusingServerFleet) CreateJob(_ context.Context, a plan.Action) error {
	if f.refuse[a.Server] {
		return errors.New("refused: " + a.Server)
	}
	if !f.jobs[a.JobUUID] {
		f.jobs[a.JobUUID] = true
		f.created = append(f.created, a.Server)
	}
	return nil
}

func (f *refusingServerFleet) CancelJob(context.Context, plan.Action) error { return nil }

func runningPlan(t *testing.T, store plan.Store, at time.Time, n int) {
	t.Helper()
	o := opts()
	o.CreatedAt = at
	p, _, err := plan.Create(servers(0, n), o)
	require.NoError(t, err)
	require.NoError(t, store.Create(context.Background(), p))
	_, err = plan.Command(context.Background(), store, "p1", plan.Run)
	require.NoError(t, err)
}

// TestRefusedJobStallsNoOtherServer (issue 38, A.1; the liveness failure
// of TestJobStateMachine at seed 8356624518063216321): the fleet refuses
// the job of one server (its dead BMC's power cycle has not settled, or
// the operator abandoned it) and the plan's concurrency allows two: the
// other server's job is created in the same pass. The pass stopped at the
// first refused action, so no later server of the plan was ever started
// while the first one was refused.
func TestRefusedJobStallsNoOtherServer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := fake.NewPlanStore()
	runningPlan(t, store, now, 2)
	f := &refusingServerFleet{refuse: map[string]bool{"u000": true}, jobs: map[string]bool{}}
	e := &plan.Executor{Fleet: f, Store: store, Config: plan.Config{JobTimeout: time.Hour}, Now: func() time.Time { return now }}
	for range 3 {
		_, err := e.Pass(context.Background(), "p1")
		require.Error(t, err, "the refusal is reported")
		assert.Contains(t, err.Error(), "refused: u000")
		now = now.Add(time.Minute)
	}
	assert.Equal(t, []string{"u001"}, f.created, "the other server's job is created whatever the first one's refusal")
}

// TestStepTimeoutAfterClockStepsBack (issue 38, C; the same seed): the
// executor's clock stepped back by a day after a reboot entered the job
// step, and the fleet keeps refusing its job: the reboot still times out
// JobTimeout after the step back (the step counts from then) instead of
// waiting for the clock to catch up with the day it lost.
func TestStepTimeoutAfterClockStepsBack(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	store := fake.NewPlanStore()
	runningPlan(t, store, now, 1)
	f := &refusingServerFleet{refuse: map[string]bool{"u000": true}, jobs: map[string]bool{}}
	cfg := plan.Config{JobTimeout: time.Hour}
	e := &plan.Executor{Fleet: f, Store: store, Config: cfg, Now: func() time.Time { return now }}
	_, _ = e.Pass(context.Background(), "p1")
	p, err := store.Get(context.Background(), "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	now = now.Add(-24 * time.Hour) // the clock steps back a day
	for end := now.Add(cfg.JobTimeout + 10*time.Minute); now.Before(end); now = now.Add(time.Minute) {
		_, _ = e.Pass(context.Background(), "p1")
	}
	p, err = store.Get(context.Background(), "p1")
	require.NoError(t, err)
	// Never shown in JobTimeout of asking: released, not failed (issue
	// 37's rule for a job the fleet refuses); the point here is when.
	assert.Equal(t, plan.StepReleased, p.Reboots[0].Step, "the refused job was given up JobTimeout after the clock stepped back")
	assert.True(t, p.State.Finished(), "the plan ended: %s", p.State)
}
