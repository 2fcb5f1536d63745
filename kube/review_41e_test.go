package kube

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41e_DeletedWhileWaitingForNodePowersHostOffAgain: the checker
// deletes the remediation (the Node recovered in its eyes, or an operator
// gave up) after rebootkit powered the host on, while the remediation
// waits for the Node, which is slow to register. The seed's cancel rows:
// a cancelled remediation only brings the host and Node back. Here, once
// the attempt's timeout passes, the deleted remediation starts a retry: a
// new reboot request, and the reboot controller powers the running host
// off again (ground truth: an off after the deletion).
func TestReview41e_DeletedWhileWaitingForNodePowersHostOffAgain(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	retry := int32(1)
	spec := workerSpec(4 * time.Second)
	spec.RetryLimit = &retry
	n0 := e.nodeOf["h0"]
	e.blockKubelet("h0") // NotReady, and not registered again after the power cycle
	e.nhcCreate(n0, spec)
	e.eventually("host powered on, the remediation waiting for its Node", 60*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Phase == remediation.PhaseWaitingForNode.String() && e.hw["h0"].HardwareOn()
	})
	require.Equal(t, 1, e.offs("h0"))
	deleted := time.Now()
	require.NoError(t, e.checker.Delete(e.ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0}}))
	time.Sleep(10 * time.Second)
	assert.False(t, e.hw["h0"].WasOffDuring(deleted, time.Now()),
		"h0 powered off after its remediation was deleted by its checker (ground truth: %d power-offs in all)\n%s", e.offs("h0"), e.dump())
}

// TestReview41e_EscalatedRemediationActsWhileFirstHoldsHost: a
// NodeHealthCheck escalates from one PowerCycleRemediation template to
// another (escalatingRemediations: "pc", then "pc2"; e.g. soft, then
// hard). h0's BMC refuses the power-on (fault kept on). The first
// remediation, timed out by NHC while h0 is off, is cancelled, gives up
// waiting for the power-on at its timeout and releases its admission (the
// per-host lock), but keeps Processing True and its finalizer: it still
// holds h0 (README: until the host is known on). The second remediation
// of the same host is then admitted and acts on h0 while the first holds
// it: its reboot request is written to h0, and the first, still
// reconciled while it holds h0, removes that request (any value) as "a
// host held off by a remediation that is over"; the second writes it
// again, and so on. Issue 41: never two at once for one host.
func TestReview41e_EscalatedRemediationActsWhileFirstHoldsHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	none := int32(0)
	spec := workerSpec(3 * time.Second)
	spec.RetryLimit = &none
	e.template("pc", spec)
	e.template("pc2", spec)
	n0 := e.nodeOf["h0"]
	nhc := newNHC(e, 0, []string{n0}, nhcStep{template: "pc", timeout: time.Hour}, nhcStep{template: "pc2", timeout: time.Hour})
	e.hang("h0")
	go nhc.run()
	e.eventually("h0 off in power-off-requested", 30*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Phase == remediation.PhasePowerOffRequested.String() && !e.hw["h0"].HardwareOn()
	})
	refuseOn.Store(true)
	nhc.mu.Lock()
	nhc.steps[0].timeout = 0 // NHC times the first out and creates the second at once
	nhc.mu.Unlock()
	second := nhc.objName(n0, 1)
	e.eventually("second remediation created", 10*time.Second, func() bool { return e.remediationOf(second) != nil })

	key := reboot.AnnotationPrefix + remediation.RebootKey
	var both string
	values := map[string]bool{} // the second's distinct reboot requests seen on h0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		r1, r2 := e.remediationOf(n0), e.remediationOf(second)
		bmh := newBMHRef(e.ns, "h0")
		require.NoError(t, e.direct.Get(e.ctx, clientKey(bmh), bmh))
		v := bmh.Annotations[key]
		if r2 != nil && v != "" && strings.Contains(v, string(r2.UID)) {
			values[v] = true
			if both == "" && r1 != nil && condition(r1, v1alpha1.ConditionProcessing) == metav1.ConditionTrue {
				both = fmt.Sprintf("%s: %s's reboot request on h0 while %s holds h0 (Processing True, phase %q, finalizer %v, h0 on=%v)",
					time.Now().Format("15:04:05.000"), second, n0, r1.Status.Phase, slices.Contains(r1.Finalizers, ReleaseFinalizer), e.hw["h0"].HardwareOn())
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the second remediation's distinct reboot requests on h0: %d", len(values))
	assert.Empty(t, both, "two remediations of one host at once\n%s", e.dump())
	assert.LessOrEqual(t, len(values), 1, "the second remediation's reboot request was removed under it and written again %d times\n%s", len(values), e.dump())
	refuseOn.Store(false)
}

// TestReview41e_GaveUpWhileOffBypassesStormGuard: the storm guard's limit
// is 1. h0's remediation has powered h0 off when NodeHealthCheck times it
// out; h0's BMC refuses the power-on (fault kept on). The cancelled
// remediation gives up waiting at its timeout: it keeps Processing True
// (h0 still held, still off) but its admission is released and, timed
// out, it no longer counts as unhealthy, so the storm guard counts h0 no
// more. h1's remediation, held back by the guard, starts and powers h1
// off: two hosts off at once against a limit of 1 (ground truth), for as
// long as the BMC refuses.
func TestReview41e_GaveUpWhileOffBypassesStormGuard(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(1))
	var refuseOn atomic.Bool
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	n0, n1 := e.nodeOf["h0"], e.nodeOf["h1"]
	start := time.Now()
	e.hang("h0")
	e.nhcCreate(n0, workerSpec(3*time.Second))
	e.eventually("h0 off in power-off-requested", 30*time.Second, func() bool {
		r := e.remediationOf(n0)
		return r != nil && r.Status.Phase == remediation.PhasePowerOffRequested.String() && !e.hw["h0"].HardwareOn()
	})
	refuseOn.Store(true)
	e.hang("h1")
	e.nhcCreate(n1, workerSpec(time.Minute))
	r := e.remediationOf(n0)
	r.Annotations[v1alpha1.TimedOutAnnotation] = time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, e.checker.Update(e.ctx, r))
	time.Sleep(10 * time.Second)
	var bothOff time.Time
	for _, tc := range append(e.hw["h0"].Truth(), e.hw["h1"].Truth()...) {
		if tc.At.After(start) && !e.hw["h0"].WasOnAt(tc.At) && !e.hw["h1"].WasOnAt(tc.At) {
			bothOff = tc.At
			break
		}
	}
	r = e.remediationOf(n0)
	assert.True(t, bothOff.IsZero(), "h0 and h1 off at once from %s against the storm guard's limit of 1 (ground truth); %s Processing %s\n%s",
		bothOff.Format("15:04:05.000"), n0, condition(r, v1alpha1.ConditionProcessing), e.dump())
	refuseOn.Store(false)
}
