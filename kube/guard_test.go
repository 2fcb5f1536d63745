package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestStormGuardPerClusterAndHealthCheck (issue 28, B9): two clusters in
// one namespace, each with MachineHealthChecks for its workers and its
// control plane, limit 1: a remediation in cluster a does not block one in
// cluster b, nor one under cluster a's other health check; a second under
// the same health check waits. The old guard counted the namespace, so the
// first remediation blocked all the others.
func TestStormGuardPerClusterAndHealthCheck(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	mhc := func(name, cluster, role string) {
		require.NoError(t, c.Create(ctx, &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: cluster, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"role": role}}}}))
	}
	mhc("a-workers", "a", "worker")
	mhc("a-cp", "a", "cp")
	mhc("b-workers", "b", "worker")
	machine := func(name, cluster, role string) {
		m := newMachine(t, c, ns, name, role == "cp")
		m.Spec.ClusterName = cluster
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels["role"] = role
		m.Labels[clusterv1.ClusterNameLabel] = cluster
		require.NoError(t, c.Update(ctx, m))
	}
	machine("a-w1", "a", "worker")
	machine("a-w2", "a", "worker")
	machine("a-cp1", "a", "cp")
	machine("b-w1", "b", "worker")
	machine("b-w2", "b", "worker")

	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Hour}, remediation.MaxCount(1), time.Now)
	ms := &Machines{Client: c, Namespace: ns}
	mark := func(name string) remediation.MachineRecord {
		t.Helper()
		var m clusterv1.Machine
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m))
		require.NoError(t, c.Patch(ctx, &m, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"`+remediation.NeedsRemediationAnnotation+`":""}}}`))))
		_, err := rem.Reconcile(ctx, name)
		require.NoError(t, err)
		rec, err := ms.Get(ctx, name)
		require.NoError(t, err)
		return rec
	}
	rec := mark("a-w1")
	assert.Equal(t, "a", rec.Machine.Cluster)
	assert.Equal(t, "a-workers", rec.Machine.HealthCheck)
	assert.Equal(t, remediation.PhasePowerOffRequested, rec.State.Phase, "first: %s", rec.State.Message)
	rec = mark("b-w1")
	assert.Equal(t, remediation.PhasePowerOffRequested, rec.State.Phase, "cluster b is not cluster a: %s", rec.State.Message)
	rec = mark("a-cp1")
	assert.Equal(t, "a-cp", rec.Machine.HealthCheck)
	assert.Equal(t, remediation.PhasePowerOffRequested, rec.State.Phase, "another health check of cluster a: %s", rec.State.Message)
	rec = mark("a-w2")
	assert.Equal(t, remediation.PhaseNone, rec.State.Phase, "same cluster and health check as a-w1: waits")
	assert.Contains(t, rec.State.Message, "storm guard")
}
