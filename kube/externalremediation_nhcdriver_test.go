package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// driverEnv is a namespace with a template "pc", the checker's client
// and no controllers: the test plays the remediation controller's writes
// itself, to put nhcDriver through one exact sequence.
func driverEnv(t *testing.T) *extEnv {
	t.Helper()
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &extEnv{t: t, ctx: ctx, direct: adminClient(t)}
	e.ns = newNamespace(t, e.direct)
	cc, err := client.New(asUser(t, "checker-"+e.ns, checkerRules(t), ""), client.Options{Scheme: scheme})
	require.NoError(t, err)
	e.checker = cc
	e.template("pc", workerSpec(2*time.Second))
	return e
}

// notReadyNode creates a NotReady Node named name.
func notReadyNode(t *testing.T, e *extEnv, name string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.NoError(t, e.direct.Create(e.ctx, n))
	t.Cleanup(func() { _ = e.direct.Delete(context.Background(), n) })
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now}}
	require.NoError(t, e.direct.Status().Update(e.ctx, n))
}

// setSucceeded writes the conditions the remediation controller reports
// (Processing False, Succeeded as given), as report does.
func setSucceeded(t *testing.T, e *extEnv, name string, succeeded metav1.ConditionStatus, reason string) {
	t.Helper()
	var r v1alpha1.PowerCycleRemediation
	require.NoError(t, e.direct.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &r))
	meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionProcessing, Status: metav1.ConditionFalse, Reason: reason})
	meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSucceeded, Status: succeeded, Reason: reason})
	require.NoError(t, e.direct.Status().Update(e.ctx, &r))
}

// TestNHCDriverGivesUpOnFailedRemediationBeingDeleted pins the fake
// NodeHealthCheck's handling of a remediation that reports Succeeded
// False while its checker's deletion waits on ReleaseFinalizer (the
// external remediation controller cancels it, reports
// RemediationCancelled, then drops the finalizer; a controller restart
// or a loaded machine can hold it there for a while). NodeHealthCheck's
// remediate treats it as failed: it annotates it nhc-timed-out and
// records the step TimedOut in its status, and with no step left gives
// up on the Node until it is healthy. The driver escalated without
// recording that, so once the object went the Node was neither
// remediated nor given up on, for ever: TestExternalRemediationStateMachine
// (e) failed under load (-rapid.seed=2681447688621816185).
func TestNHCDriverGivesUpOnFailedRemediationBeingDeleted(t *testing.T) {
	e := driverEnv(t)
	node := e.ns + "-h0"
	notReadyNode(t, e, node)
	d := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: time.Hour})
	d.pass(node)
	r := e.remediationOf(node)
	require.NotNil(t, r, "the driver creates a remediation for an unhealthy Node")

	// The controller's finalizer, the checker's deletion, the cancelled
	// report (report), the driver's pass in between, the finalizer gone.
	r.Finalizers = append(r.Finalizers, ReleaseFinalizer)
	require.NoError(t, e.direct.Update(e.ctx, r))
	require.NoError(t, e.checker.Delete(e.ctx, r))
	setSucceeded(t, e, node, metav1.ConditionFalse, "RemediationCancelled")
	d.pass(node)
	r = e.remediationOf(node)
	require.NotNil(t, r)
	require.Contains(t, r.Annotations, v1alpha1.TimedOutAnnotation, "NodeHealthCheck annotates a failed remediation nhc-timed-out (remediate)")
	r.Finalizers = nil
	require.NoError(t, e.direct.Update(e.ctx, r))
	e.eventually("the remediation gone", 10*time.Second, func() bool { return e.remediationOf(node) == nil })
	for range 3 {
		d.pass(node)
	}

	// The Node is not Ready: it has a remediation, or the checker gave up.
	timedOut, _ := d.times(node)
	require.True(t, e.remediationOf(node) != nil || !timedOut.IsZero(),
		"Node %s NotReady with no remediation and its checker not given up on it", node)
	require.False(t, timedOut.IsZero(), "NodeHealthCheck records a failed step TimedOut in its status")
}

// TestNHCDriverRecreatesRemediationDeletedUnreported pins the other side:
// a remediation deleted (by someone else) before it reported anything is
// created again while its Node is unhealthy, and nothing is given up.
func TestNHCDriverRecreatesRemediationDeletedUnreported(t *testing.T) {
	e := driverEnv(t)
	node := e.ns + "-h0"
	notReadyNode(t, e, node)
	d := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: time.Hour})
	d.pass(node)
	r := e.remediationOf(node)
	require.NotNil(t, r)
	require.NoError(t, e.checker.Delete(e.ctx, r))
	e.eventually("the remediation gone", 10*time.Second, func() bool { return e.remediationOf(node) == nil })
	d.pass(node)
	d.pass(node)
	again := e.remediationOf(node)
	require.NotNil(t, again, "created again for the unhealthy Node")
	require.NotEqual(t, r.UID, again.UID)
	timedOut, _ := d.times(node)
	require.True(t, timedOut.IsZero())
}

// TestNHCDriverTimesOutSucceededRemediation: a step that times out with
// Succeeded True while its Node is still unhealthy is recorded TimedOut
// without the annotation and the checker goes on (NodeHealthCheck's
// remediate: "skipping timeout annotation on remediation CR: Succeeded
// condition is True", then TimedOut set).
func TestNHCDriverTimesOutSucceededRemediation(t *testing.T) {
	e := driverEnv(t)
	node := e.ns + "-h0"
	notReadyNode(t, e, node)
	d := newNHC(e, 0, []string{node}, nhcStep{template: "pc", timeout: 200 * time.Millisecond})
	d.pass(node)
	require.NotNil(t, e.remediationOf(node))
	setSucceeded(t, e, node, metav1.ConditionTrue, "RemediationFinished")
	time.Sleep(300 * time.Millisecond)
	d.pass(node)
	timedOut, _ := d.times(node)
	require.False(t, timedOut.IsZero(), "timed out with the Node still unhealthy: given up")
	r := e.remediationOf(node)
	require.NotNil(t, r)
	require.NotContains(t, r.Annotations, v1alpha1.TimedOutAnnotation)
}
