package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestJobTimeoutsAfterClockStepsBack (issue 38, C; the liveness failure
// of TestJobStateMachine at seed 1529239932094947374): the wall clock
// jumped a year ahead while a job ran, then was corrected. A job whose
// stamps lie in the future still times out, counted from the correction:
// the executor's own server whose reboot command failed (same boot ID)
// fails after the grace, and a job whose request was never written fails
// JobTimeout later. Old code: both waited a year for the clock to catch
// up (the plan's cancel did not end them either), holding the server
// drained.
func TestJobTimeoutsAfterClockStepsBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	ahead := now.AddDate(1, 0, 0)
	for _, c := range []struct {
		name string
		in   jobInput
	}{
		{"own server's reboot command failed", jobInput{Self: true, HasReboot: true, BootID: "b1", JobTimeout: time.Hour,
			Job: JobRecord{UUID: "j", Server: "s", State: JobSelfReboot, Cancel: true, BootID: "b1", RebootSentBoot: "b1",
				RebootSentAt: &ahead, RebootError: "reboot command: exit status 1", Created: ahead, Requested: &ahead, StateAt: ahead}}},
		{"request never written", jobInput{JobTimeout: time.Hour,
			Job: JobRecord{UUID: "j", Server: "s", State: JobRebooting, Key: "rebootctl-j", RequestValue: "v", RequestAt: ahead,
				Created: ahead, Requested: &ahead, StateAt: ahead}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			at := now
			for ; at.Before(now.Add(2 * time.Hour)); at = at.Add(time.Minute) {
				before := in.Job
				st := decideJob(in, at)
				assert.Equal(t, before, in.Job, "decideJob changed its input")
				if st.Changed {
					in.Job = st.Job
				}
				if st.AfterOK != nil && st.Act == actNone {
					in.Job = *st.AfterOK
				}
				if in.Job.State == JobUndraining || in.Job.State == JobWithdrawing || in.Job.Over() {
					break
				}
			}
			assert.Contains(t, []string{JobUndraining, JobFailed, JobCancelled, JobWithdrawing}, in.Job.State,
				"the job ended (through its undrain) within JobTimeout of the correction: %s at %s", in.Job.State, at)
			assert.False(t, at.After(now.Add(time.Hour+time.Minute)), "ended at %s", at)
		})
	}
}

// TestAbandonEndsRefusedReboot (issue 38, A.1; found with the liveness
// failure of TestJobStateMachine at seed 8356624518063216321): a dead
// BMC's power cycle has not settled, so the job of a later plan for that
// server is refused; the operator abandons the server in that plan: its
// reboot ends failed at once, and the plan ends. Old code: the fleet
// refused the job for ever (ErrAbandoned) and the plan waited its whole
// job timeout for a job that was never going to exist.
func TestAbandonEndsRefusedReboot(t *testing.T) {
	w, ids := offThenDead(t)
	defer w.close()
	w.run(ids, w.cfg.JobTimeout+2*time.Minute)
	first, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	require.False(t, first.Unfinished(), plan.Table(first))
	w.newPlan()
	require.Len(t, w.plans, 2)
	w.run(ids, time.Minute)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the later plan's job is refused while the cycle has not settled")
	b := w.bmcs[ids[0]]
	require.NoError(t, w.f.Abandon("cn0", w.plans[1], "by alice"))
	calls := len(b.p.Calls())
	w.run(ids, 30*time.Second)
	p, err := w.store.Get(w.ctx(), w.plans[1])
	require.NoError(t, err)
	assert.Equal(t, plan.StepFailed, p.Reboots[0].Step, plan.Table(p))
	assert.Contains(t, p.Reboots[0].Error, "abandoned by the operator (by alice)")
	assert.False(t, p.Unfinished(), plan.Table(p))
	b.mode = bmcOK
	w.run(ids, 10*time.Minute)
	assert.Equal(t, calls, len(b.p.Calls()), "nothing reaches an abandoned server's BMC")
}

// TestSelfUnsettledCycleDropped (issue 38, A.2; the liveness failure of
// TestJobStateMachine at seed 3185088740164526513): a job's power-off
// timed out (not applied), so the job ended saying the server may be off
// and the fleet kept reconciling it; then the executor learns that it
// runs on that server. It is on (the executor runs there): the fleet
// drops the power cycle it could only complete through the server's BMC,
// and never powers it off. Old code: the fleet tried the held power-off
// every few seconds for ever, and the server counted as unsettled.
func TestSelfUnsettledCycleDropped(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.budget = 1
	b := w.bmcs[ids[0]]
	b.mode = bmcOffHung
	w.open()
	defer func() { w.close() }()
	w.newPlan()
	var jobs []JobRecord
	for i := 0; i < 3600; i++ {
		w.run(ids, time.Second)
		var err error
		jobs, err = w.f.Jobs()
		require.NoError(t, err)
		if len(jobs) == 1 && jobs[0].Over() {
			break
		}
	}
	require.Len(t, jobs, 1)
	require.Equal(t, JobFailed, jobs[0].State, jobs[0].Error)
	// The BMC answers busy from now on: no reading tells the fleet the
	// server is on.
	b.mode = bmcBusy
	w.run(ids, 3*time.Minute)
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	require.True(t, h.needsKeeping(), "the fleet keeps reconciling a server whose power-off may have been accepted")
	require.True(t, b.p.HardwareOn())
	w.setSelf(ids[0])
	w.run(ids, 5*time.Minute)
	h, err = w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.False(t, h.needsKeeping(), "the executor runs on the server, so it is on: nothing is left to reconcile (%s)", h.Phase)
	for _, tc := range b.p.Truth() {
		assert.True(t, tc.On, "the executor's own server was powered off through its BMC at %s", tc.At)
	}
}
