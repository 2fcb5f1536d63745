package main

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// stopThenPowerOffCheck is the fake fleet; while the executor's first
// CreateJob call is with the BMC, the operator gives `plan stop` (its own
// rebootctl applies it), and then a job of the same plan that runs in the
// executor's process (created by an earlier pass) reaches its first
// power-off: the fleet asks PlanCheck, which reads the plan's view through
// the executor's own store (executor.go: store.GetView(ctx, planUUID)).
type stopThenPowerOffCheck struct {
	*fake.Fleet
	e, ops    *env
	t         *testing.T
	calls     atomic.Int32
	afterStop []string
	stopped   atomic.Bool
	checkView plan.View
}

func (f *stopThenPowerOffCheck) CreateJob(ctx context.Context, a plan.Action) error {
	if f.stopped.Load() {
		f.afterStop = append(f.afterStop, a.JobUUID)
	}
	err := f.Fleet.CreateJob(ctx, a)
	if f.calls.Add(1) == 1 {
		v, serr := f.ops.operatorCommand("stop", "p1")
		require.NoError(f.t, serr)
		require.Equal(f.t, plan.StateStopped, v.State)
		f.stopped.Store(true)
		// PlanCheck of another job of p1, in the executor's process.
		f.checkView, serr = lockedStore{f.e}.GetView(ctx, "p1")
		require.NoError(f.t, serr)
	}
	return err
}

// TestReview37u_PowerOffCheckHidesStopFromPass: CommandPending is false
// for a command recorded before the executor's last read of the plan
// through lockedStore.read (pendingCmds.saw), whatever that read was for.
// The executor's PlanCheck (run by the fleet's job workers, concurrently
// with the pass, before every first power-off) reads the plan through the
// same lockedStore.GetView: it marks the plan seen at a mark past the
// operator's stop, although the pass running at that moment decided on an
// older read and never looks at what PlanCheck read. CommandPending then
// says false and the pass goes on creating jobs until its next 16-job
// recheck: 15 jobs after the operator was told "stopped". A stop does not
// end a plan (State.Finished is false), so PlanCheck lets these jobs power
// their servers off (jobLive: job step, plan not finished): 15 reboots
// started after a stop landed. README: "no reboot starts after a stop or
// cancel has landed (but the job being created as it landed)". Ground
// truth: the jobs the fake fleet was asked to create after the stop
// command returned.
func TestReview37u_PowerOffCheckHidesStopFromPass(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 20)
	ops := &env{ctx: e.ctx, store: e.store} // the operator's own process
	f := &stopThenPowerOffCheck{Fleet: fleet, e: e, ops: ops, t: t}
	ex := &plan.Executor{Fleet: f, Store: lockedStore{e}, Now: clk.Now}
	_, _ = ex.Pass(e.ctx, "p1")
	require.True(t, f.stopped.Load(), "the stop was given")
	if assert.Empty(t, f.afterStop, "jobs created after the operator's stop returned \"stopped\" (%d jobs in all)", f.calls.Load()) {
		return
	}
	// What those jobs' own power-off check says: go ahead.
	live, why := jobLive(f.checkView, f.afterStop[0], true)
	t.Logf("PlanCheck of job %s created after the stop: live=%v (%s)", f.afterStop[0], live, why)
}
