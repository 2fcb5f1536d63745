package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestDeadBMCStallsOnlyItsServer: at concurrency 1, one server's BMC
// refuses every login for ever. Its power-off was never sent, so its job
// is released without a power reading once it times out; the other
// server is rebooted and the plan ends; a cancelled plan ends too
// (issue 38, A.1; old code: the job waited in withdrawing for a reading
// that never came, held the slot, and the plan never ended).
func TestDeadBMCStallsOnlyItsServer(t *testing.T) {
	for _, mode := range []int{bmcAuth, bmcHung} {
		w, ids := newWorld(t, 2, 1)
		dead := ids[0]
		w.bmcs[dead].mode = mode
		w.budget = 1
		w.open()
		w.newPlan()
		w.run(ids, w.cfg.JobTimeout+5*time.Minute)
		pl, err := w.store.Get(w.ctx(), w.plans[0])
		require.NoError(t, err)
		assert.False(t, pl.Unfinished(), "mode %d: the plan ended: %s", mode, plan.Table(pl))
		assert.Equal(t, 1, w.bmcs[ids[1]].p.Cycles(), "mode %d: the other server was rebooted", mode)
		assert.True(t, w.bmcs[dead].p.HardwareOn())
		h, err := w.f.hosts.load(dead)
		require.NoError(t, err)
		assert.False(t, h.needsKeeping(), "mode %d: nothing left to reconcile on a server never powered off: %+v", mode, h)
		w.close()
	}
}

// TestDeadBMCCancelledPlanEnds: a plan cancelled while its only job waits
// on a BMC that never answers ends at once (issue 38, A.1; old code: the
// job waited in withdrawing for ever).
func TestDeadBMCCancelledPlanEnds(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.bmcs[ids[0]].mode = bmcAuth
	w.open()
	defer w.close()
	w.newPlan()
	w.run(ids, 2*time.Minute)
	_, err := plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel)
	require.NoError(t, err)
	w.run(ids, 2*time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobCancelled, jobs[0].State, jobs[0].Error)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
}

// offThenDead runs a one-server world until its BMC accepted a power-off,
// then makes the BMC hang for ever (nothing it is asked is applied).
func offThenDead(t *testing.T) (*world, []string) {
	w, ids := newWorld(t, 1, 1)
	w.budget = 1
	b := w.bmcs[ids[0]]
	w.open()
	w.newPlan()
	for i := 0; i < 300 && len(b.offs) == 0; i++ {
		w.run(ids, time.Second)
	}
	require.NotEmpty(t, b.offs, "a power-off was sent")
	b.mode = bmcHung
	return w, ids
}

// TestDeadBMCMidCycleEndsJob: the BMC accepted the power-off, then never
// answers again. The job ends failed within the job timeout of its
// request, saying the server may be off, and the plan ends; the fleet
// keeps the server's power bookkeeping and powers it on once its BMC
// answers (issue 38, A.1; old code: the job waited in rebooting for ever).
func TestDeadBMCMidCycleEndsJob(t *testing.T) {
	w, ids := offThenDead(t)
	defer w.close()
	b := w.bmcs[ids[0]]
	w.run(ids, w.cfg.JobTimeout+2*time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobFailed, jobs[0].State)
	assert.Contains(t, jobs[0].Error, "may be off")
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.True(t, h.needsKeeping(), "the fleet still reconciles a server that may be off")
	b.mode = bmcOK
	w.run(ids, 10*time.Minute)
	assert.True(t, b.p.HardwareOn(), "powered on once the BMC answers")
}

// TestAbandonServer: the operator abandons a server whose BMC died
// mid-cycle: its job ends at once, undrained, naming its last known
// power phase; nothing is sent to its BMC any more, even once it answers;
// Status shows it abandoned (issue 38, A.1; old code: no way to give up).
func TestAbandonServer(t *testing.T) {
	w, ids := offThenDead(t)
	defer w.close()
	b := w.bmcs[ids[0]]
	undrained := 0
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "undrain" {
			undrained++
		}
		return nil
	}
	w.f.inv.Servers[0].Undrain = []string{"undrain"}
	w.run(ids, time.Minute)
	require.NoError(t, w.f.Abandon("cn0", w.plans[0], "by alice"))
	w.run(ids, 10*time.Second)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, JobFailed, jobs[0].State)
	assert.Contains(t, jobs[0].Error, "abandoned by the operator (by alice); last known power:")
	assert.Equal(t, 1, undrained)
	b.mode = bmcOK
	calls := len(b.p.Calls())
	w.run(ids, 30*time.Minute)
	assert.Equal(t, calls, len(b.p.Calls()), "nothing reaches an abandoned server's BMC")
	st, err := w.f.Status()
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.Equal(t, "by alice", st[0].Abandoned)
	pl, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	assert.False(t, pl.Unfinished(), plan.Table(pl))
	assert.ErrorIs(t, w.f.CreateJob(w.ctx(), plan.Action{Server: ids[0], JobUUID: "again", PlanUUID: w.plans[0]}), ErrAbandoned)
}
