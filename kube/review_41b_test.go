package kube

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41b_FailedWhileRebootkitStillPowersOn: h0's BMC refuses the
// power-on for a while (fault kept on, then healed). The remediation
// passes to waiting-for-node while the hardware is off (ground truth),
// runs out of its attempts and reports Succeeded False / Processing False
// (RemediationFailed), on which NodeHealthCheck escalates at once to the
// next remediator, while h0 is still off; and rebootkit has not let go:
// once the BMC works again rebootkit's reboot controller powers h0 on
// (ground truth), so the next remediator (Fence Agents Remediation powering
// it off) and rebootkit race on the host. The README: Processing stays True
// until the host is released; the issue: no escalation while rebootkit
// still holds the host off.
func TestReview41b_FailedWhileRebootkitStillPowersOn(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	retry := int32(1)
	spec := workerSpec(3 * time.Second)
	spec.RetryLimit = &retry
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	e.nhcCreate(n0, spec)
	// The BMC stays refusing until 3 s after the remediation's attempts have
	// run out (phase failed), then works again. (As first written, the test
	// healed the BMC only after Succeeded False, which the fix never reports
	// while h0 is off: it waited for ever.)
	var onAtFailure, seen bool
	var failedAt, phaseFailedAt time.Time
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		r := e.remediationOf(n0)
		if r != nil && r.Status.Phase == "failed" && phaseFailedAt.IsZero() {
			phaseFailedAt = time.Now()
		}
		if !phaseFailedAt.IsZero() && time.Since(phaseFailedAt) > 3*time.Second {
			refuseOn.Store(false) // the BMC works again
		}
		if r != nil && condition(r, v1alpha1.ConditionSucceeded) == metav1.ConditionFalse {
			onAtFailure, seen, failedAt = e.hw["h0"].HardwareOn(), true, time.Now()
			t.Logf("Succeeded False (%s), Processing %s, phase %q, h0 on=%v held=%v", r.Status.Message,
				condition(r, v1alpha1.ConditionProcessing), r.Status.Phase, onAtFailure, e.held("h0"))
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.True(t, seen, "never Succeeded False\n%s", e.dump())
	require.False(t, refuseOn.Load(), "Succeeded False while the BMC still refused power-on (h0 off, rebootkit still means to power it on)\n%s", e.dump())
	poweredOnAfter := false
	for _, tc := range e.hw["h0"].Truth() {
		if tc.On && tc.At.After(failedAt) {
			poweredOnAfter = true
		}
	}
	assert.True(t, onAtFailure,
		"Succeeded False (NHC escalates now) while h0 was still off (ground truth); rebootkit powered it on after that: %v\n%s", poweredOnAfter, e.dump())
	assert.False(t, poweredOnAfter, "rebootkit powered h0 on after it reported Succeeded False (ground truth)\n%s", e.dump())
}
