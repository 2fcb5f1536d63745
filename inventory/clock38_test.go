package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
