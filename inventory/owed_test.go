package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestOwedListsWhatOnlyThisFileDoes (review 37 round 24): Owed lists a
// server while its job lives (OwedJob), and, once the job has given up on
// its power cycle at the job timeout (every power-on refused, busy), while
// the server may be off (OwedPower, naming the job and its plan), also
// after the job ended; once the BMC answers and the server reads on, and
// no power-off can land any more, nothing. Ground truth: the fake
// hardware's power state.
func TestOwedListsWhatOnlyThisFileDoes(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	p := w.bmcs[id].p
	refuse := true
	p.SetConfig(fake.PowerConfig{Lag: time.Second, SoftDelay: 5 * time.Second, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuse {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		return fake.Fault{}
	}})
	w.open()
	defer func() { _ = w.f.Close() }()
	owed := func() []Owed {
		o, err := w.f.Owed()
		require.NoError(t, err)
		return o
	}
	require.Empty(t, owed())
	w.newPlan()
	w.run(ids, 3*time.Second)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	job := jobs[0]
	require.Equal(t, []Owed{{Server: id, Hostname: "cn0", Plan: "p1", Job: job.UUID, What: OwedJob}}, owed(), "a live job")

	for range 3600 {
		w.run(ids, time.Second)
		if j, _, _ := w.f.job(job.UUID); j.Over() {
			break
		}
	}
	j, _, err := w.f.job(job.UUID)
	require.NoError(t, err)
	require.True(t, j.Over(), "the job gave up at the job timeout: %+v", j)
	require.False(t, p.HardwareOn(), "the server is off (its power-on refused)")
	assert.Equal(t, []Owed{{Server: id, Hostname: "cn0", Plan: "p1", Job: job.UUID, What: OwedPower}}, owed(), "the job ended; the server's power-on is owed")

	refuse = false
	for i := 0; i < 1800 && len(owed()) > 0; i++ {
		w.run(ids, time.Second)
	}
	assert.True(t, p.HardwareOn(), "powered on once the BMC answers")
	assert.Empty(t, owed(), "nothing owed once the power cycle settled")
}

// TestAbandonedJobOfAnotherFileFails (review 37 round 24): an executor
// with another fleet state file, let take the store over because the
// operator abandoned the server whose job was in the first file, finds a
// reboot in its job step whose job it does not have (seen once): it
// records the reboot failed, saying the server was abandoned, never done
// as if the fleet had collected a finished job ("seen once, gone now").
// Ground truth: the reboot's step read from the plan store, and the
// BMC's power calls (none).
func TestAbandonedJobOfAnotherFileFails(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	w.open()
	w.newPlan()
	w.pass()
	w.pass()
	p, err := w.store.Get(w.ctx(), "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	require.True(t, p.Reboots[0].JobSeen, "the first file's job is seen")
	require.NoError(t, w.f.Close())

	w.path += ".other" // another fleet state file: the job is not in it
	w.open()
	defer func() { _ = w.f.Close() }()
	require.NoError(t, w.f.Abandon(id, "p1", "plan abandon by the operator"))
	for range 5 {
		w.pass()
		w.step(id)
		w.clk.Advance(time.Second)
	}
	p, err = w.store.Get(w.ctx(), "p1")
	require.NoError(t, err)
	r := p.Reboots[0]
	assert.Equal(t, plan.StepFailed, r.Step, "an abandoned server whose job this file lacks is recorded failed, not taken for done")
	assert.Contains(t, r.Error, "abandoned")
	assert.Empty(t, w.bmcs[id].p.Calls(), "nothing powered")
}
