package kube

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestExternalRemediation_HeldWhileBMCRefusesPowerOn: h0's BMC refuses
// the power-on until the remediation has failed (its attempts ran out)
// and some more. All that time h0 is off (ground truth) and rebootkit's
// reboot controller still means to power it on: the remediation keeps
// Processing True, never reports Succeeded False (NodeHealthCheck would
// escalate to the next remediator) and keeps its finalizer. Once the BMC
// works, h0 is powered on, and only then does the remediation report its
// failure and let go.
func TestExternalRemediation_HeldWhileBMCRefusesPowerOn(t *testing.T) {
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
	// Watch until the attempts have run out (phase failed) and 3 s more.
	var failedAt time.Time
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && (failedAt.IsZero() || time.Since(failedAt) < 3*time.Second) {
		r := e.remediationOf(n0)
		on := e.hw["h0"].HardwareOn()
		if r != nil && !on {
			require.NotEqual(t, metav1.ConditionFalse, condition(r, v1alpha1.ConditionSucceeded),
				"Succeeded False (NodeHealthCheck escalates) while h0 is off (ground truth) and rebootkit still powers it on\n%s", e.dump())
			if r.Status.Phase == "failed" {
				require.Equal(t, metav1.ConditionTrue, condition(r, v1alpha1.ConditionProcessing),
					"Processing not True after the failure while h0 is off\n%s", e.dump())
				require.True(t, slices.Contains(r.Finalizers, ReleaseFinalizer), "finalizer gone while h0 is off\n%s", e.dump())
			}
		}
		if r != nil && r.Status.Phase == "failed" && failedAt.IsZero() {
			failedAt = time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.False(t, failedAt.IsZero(), "the remediation never failed\n%s", e.dump())
	require.False(t, e.hw["h0"].HardwareOn(), "h0 on while its BMC refuses power-on (ground truth)")
	refuseOn.Store(false) // the BMC works again
	e.eventually("Succeeded False once h0 is on", 30*time.Second, func() bool {
		r := e.remediationOf(n0)
		if r == nil || condition(r, v1alpha1.ConditionSucceeded) != metav1.ConditionFalse {
			return false
		}
		require.True(t, e.hw["h0"].HardwareOn(), "Succeeded False while h0 is off (ground truth)\n%s", e.dump())
		return true
	})
}
