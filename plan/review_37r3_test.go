package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_ShowFromAfterClockStepsBackKeepsCancelOpen: issue 38's fix
// (merged in i38a) makes every start instant later than now count from
// now (StepSince, DrainSince, AskedAt, JobCreatedAt: next.go, "A step ...
// that began after now: the clock stepped back since. It counts from now,
// so that its timeout runs out at most its length after the step back";
// issue 38 C: "a day back kept a refused job waiting a day"). ShowFrom,
// added by i37f, is the start of ShowTimeout and is left out of that
// clamp. A reboot's job is refused by the fleet (ground truth: the fake
// fleet never had it), the operator cancels, the next pass sets ShowFrom
// (a cancelled plan does not ask again), then the wall clock steps back a
// day (NTP correcting a clock that ran ahead): now.Sub(ShowFrom) stays
// negative until the clock has caught up, so the reboot stays "asked for,
// not shown yet", its server counted offline, and the cancelled plan stays
// unfinished for a day of real time (its servers cannot go into another
// plan: ErrServerInPlan). Expected: released ShowTimeout (1 min) after the
// step back, plus a pass or two.
func TestReview37_ShowFromAfterClockStepsBackKeepsCancelOpen(t *testing.T) {
	fs := fleetServers(0, 3, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(1)
	w := newWorld(t, fs, "", o)
	w.exec = &plan.Executor{Fleet: refusingFleet{w.fleet, fs[0].UUID}, Store: w.store, Now: w.clk.Now}
	_, _ = w.exec.Pass(w.ctx, w.uuid) // asks for fs[0]'s job: refused
	p, err := w.store.Get(w.ctx, w.uuid)
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	require.Equal(t, fs[0].UUID, p.Reboots[0].ServerUUID)
	_, err = plan.Command(w.ctx, w.store, w.uuid, plan.Cancel)
	require.NoError(t, err)
	w.clk.Advance(30 * time.Second)
	_, _ = w.exec.Pass(w.ctx, w.uuid)
	p, err = w.store.Get(w.ctx, w.uuid)
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	require.NotNil(t, p.Reboots[0].ShowFrom, "the pass after the ask started ShowTimeout")
	w.clk.Jump(-24 * time.Hour) // the wall clock steps back a day
	for i := 0; i < 30; i++ {   // half an hour of real time, a pass a minute
		w.clk.Advance(time.Minute)
		_, _ = w.exec.Pass(w.ctx, w.uuid)
	}
	p, err = w.store.Get(w.ctx, w.uuid)
	require.NoError(t, err)
	require.Zero(t, w.fleet.JobsCreated()[fs[0].UUID], "the fleet never had a job of it")
	assert.Equal(t, plan.StepReleased, p.Reboots[0].Step,
		"30 min of real time after the clock stepped back a day, the refused job of a cancelled plan is still waiting out ShowTimeout (ShowFrom %s, now %s):\n%s",
		p.Reboots[0].ShowFrom, w.clk.Now(), plan.Table(p))
	assert.False(t, p.Unfinished(), "the cancelled plan is still unfinished")
}
