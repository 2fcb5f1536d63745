package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview38_ShowFromAfterClockStepsBackHoldsPlan (the liveness failure
// of inventory's TestJobStateMachine at seed 5315435053614825194, found by
// review 38 round 1): a reboot's job was asked for and never shown (the
// fleet refuses it), the plan was cancelled, and the next pass noted when
// the job's ShowTimeout began (Reboot.ShowFrom). The executor's clock,
// which ran a day ahead (a bad time source), is then corrected: it steps
// back a day. Issue 38 (C) made every stamp
// of a step that lies after now count from now (StepSince, DrainSince,
// AskedAt, JobCreatedAt), so that a timeout runs out at most its length
// after a step back; ShowFrom (added by issue 37) was left out: the
// reboot waits in the job step, counted offline, until the clock has
// caught up with the day it lost, and the cancelled plan never ends
// before then.
func TestReview38_ShowFromAfterClockStepsBackHoldsPlan(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	store := fake.NewPlanStore()
	runningPlan(t, store, now, 1)
	f := &refusingServerFleet{refuse: map[string]bool{"u000": true}, jobs: map[string]bool{}}
	cfg := plan.Config{JobTimeout: time.Hour, ShowTimeout: time.Minute}
	e := &plan.Executor{Fleet: f, Store: store, Config: cfg, Now: func() time.Time { return now }}
	_, _ = e.Pass(context.Background(), "p1") // asks for the job: refused
	p, err := store.Get(context.Background(), "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	_, err = plan.Command(context.Background(), store, "p1", plan.Cancel)
	require.NoError(t, err)
	now = now.Add(30 * time.Second) // the next pass
	_, _ = e.Pass(context.Background(), "p1")
	p, err = store.Get(context.Background(), "p1")
	require.NoError(t, err)
	require.True(t, p.Unfinished(), "the plan waits for the job asked for (ShowTimeout)")
	require.NotNil(t, p.Reboots[0].ShowFrom, "the pass noted when ShowTimeout began")
	now = now.Add(-24 * time.Hour) // corrected: the clock steps back a day
	for end := now.Add(cfg.JobTimeout + cfg.ShowTimeout + 10*time.Minute); now.Before(end); now = now.Add(time.Minute) {
		_, _ = e.Pass(context.Background(), "p1")
	}
	p, err = store.Get(context.Background(), "p1")
	require.NoError(t, err)
	assert.False(t, p.Unfinished(), "the cancelled plan ended within JobTimeout+ShowTimeout of the step back: it is %s, reboot of %s in step %s (ShowFrom %v, now %v)",
		p.State, p.Reboots[0].ServerHostname, p.Reboots[0].Step, p.Reboots[0].ShowFrom, now)
	assert.NotEqual(t, plan.StepJob, p.Reboots[0].Step, "the reboot whose job was never shown left the job step")
}
