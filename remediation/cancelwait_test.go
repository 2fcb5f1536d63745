package remediation_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestCancelledWaitCountsFromTheCancel: a remediation cancelled late in
// its attempt (9 of 10 minutes) still holds its host, admitted, for a
// whole timeout from the cancel while the host is not back on; it gave
// up after one more minute when the timeout ran from the attempt's start
// (TestReview41_CancelledRemediationForgetsNodeLabels).
func TestCancelledWaitCountsFromTheCancel(t *testing.T) {
	c := remediation.Config{Timeout: 10 * time.Minute, PollInterval: time.Second}
	t0 := time.Unix(1_000_000, 0)
	o := remediation.Observed{Machine: remediation.Machine{Name: "m", UID: "u"}, Host: remediation.Host{RebootAnnotation: true}, Admitted: true,
		State: remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t0, RequestedAt: t0}}
	cancel := t0.Add(9 * time.Minute)
	d := c.Decide(o, cancel)
	require.Equal(t, remediation.PhasePoweringOn, d.State.Phase, d.Reason)
	assert.True(t, d.State.Canceled)
	assert.Equal(t, cancel, d.State.CanceledAt)
	assert.False(t, d.Release)
	assert.True(t, d.RemoveRebootAnnotation)
	o.State, o.Host = d.State, remediation.Host{}
	for _, after := range []time.Duration{2 * time.Minute, 9 * time.Minute} {
		d = c.Decide(o, cancel.Add(after))
		assert.Equal(t, remediation.PhasePoweringOn, d.State.Phase, "%s after the cancel: %s", after, d.Reason)
		assert.False(t, d.Release, "%s after the cancel", after)
	}
	d = c.Decide(o, cancel.Add(10*time.Minute))
	assert.Equal(t, remediation.PhaseDone, d.State.Phase, d.Reason)
	assert.True(t, d.Release)
}
