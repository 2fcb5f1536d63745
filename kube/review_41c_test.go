package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestExternalRemediation_FailedWhileRebootPending (found by
// TestExternalRemediationStateMachine, testdata/rapid/...-25191.fail: a
// BMC read refused once kept the reboot controller from recording the
// power-off in time): h0's power-off takes 4 s (the BMC shows it
// transitioning), the remediation's attempt times out after 2 s with no
// retry. The remediation removed its request and reported Succeeded False
// / Processing False (NodeHealthCheck escalates now) although the reboot
// controller still had the reboot pending: it went on to power h0 off and
// then on again (the BMC's call log), racing the next remediator. It
// checked only the evidence of a power-off (LastPoweredOff after the
// request), not the pending reboot that was about to make some.
func TestExternalRemediation_FailedWhileRebootPending(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 4 * time.Second})
	retry := int32(0)
	spec := workerSpec(2 * time.Second)
	spec.RetryLimit = &retry
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(n0, spec)
	var releasedAt time.Time
	var onAtRelease bool
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && releasedAt.IsZero() {
		r := e.remediationOf(n0)
		if condition(r, v1alpha1.ConditionSucceeded) == metav1.ConditionFalse && condition(r, v1alpha1.ConditionProcessing) == metav1.ConditionFalse {
			releasedAt, onAtRelease = time.Now(), e.hw["h0"].HardwareOn()
			t.Logf("released: %s (phase %q), h0 %v", r.Status.Message, r.Status.Phase, e.hw["h0"].Current())
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.False(t, releasedAt.IsZero(), "never Succeeded False / Processing False\n%s", e.dump())
	time.Sleep(6 * time.Second) // the reboot controller, if it still acts, does so in this time
	var after []string
	for _, c := range e.hw["h0"].Calls() {
		if c.Op != fake.OpState && c.At.After(releasedAt) {
			after = append(after, c.Op.String()+" at "+c.At.Format("15:04:05.000"))
		}
	}
	assert.Empty(t, after, "power commands to h0 after the remediation reported Succeeded False / Processing False at %s\n%s",
		releasedAt.Format("15:04:05.000"), e.dump())
	assert.True(t, onAtRelease, "released while h0 was off (ground truth)")
	assert.True(t, e.hw["h0"].HardwareOn())
}
