package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

func newMachine(t *testing.T, c client.Client, ns, name string, controlPlane bool) *clusterv1.Machine {
	t.Helper()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: name + "-m3m"}}}
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	require.NoError(t, c.Create(context.Background(), m))
	return m
}

// TestMachinesOnAPIServer: the Machine store on real Cluster API Machines
// (core/v1beta2 CRD generated from the typed API): the remediation marks
// read, the state saved with compare-and-swap, the mark removed, the
// Machine deleted; and a Machine's BareMetalHost found through its
// Metal3Machine.
func TestMachinesOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	m := newMachine(t, c, ns, "m1", true)
	newMachine(t, c, ns, "m2", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "node-1"}
	require.NoError(t, c.Status().Update(ctx, m))

	s := &Machines{Client: c, Namespace: ns}
	rec, err := s.Get(ctx, "m1")
	require.NoError(t, err)
	assert.True(t, rec.Machine.NeedsRemediation)
	assert.True(t, rec.Machine.ControlPlane)
	assert.False(t, rec.Machine.HasControllerOwner)
	assert.Equal(t, "node-1", rec.Machine.NodeName)
	assert.Equal(t, string(m.UID), rec.Machine.UID)
	all, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 2)

	st := remediation.State{Phase: remediation.Phase(1), Attempt: 1, Started: time.Unix(1700000000, 0).UTC()}
	require.NoError(t, s.SaveState(ctx, "m1", rec.Version, st))
	assert.ErrorIs(t, s.SaveState(ctx, "m1", rec.Version, st), remediation.ErrConflict, "stale version")
	rec2, err := s.Get(ctx, "m1")
	require.NoError(t, err)
	assert.Equal(t, st.Attempt, rec2.State.Attempt)
	assert.True(t, st.Started.Equal(rec2.State.Started))

	require.NoError(t, s.RemoveNeedsRemediation(ctx, "m1"))
	require.NoError(t, s.RemoveNeedsRemediation(ctx, "m1"), "absent is fine")
	rec3, err := s.Get(ctx, "m1")
	require.NoError(t, err)
	assert.False(t, rec3.Machine.NeedsRemediation)

	// The host of a Machine: the BareMetalHost whose consumerRef is the
	// Machine's Metal3Machine.
	h := newBMH(t, c, ns, "host-a")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m1-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	name, err := HostOfMachine(ctx, c, ns, "m1")
	require.NoError(t, err)
	assert.Equal(t, "host-a", name)
	name, err = HostOfMachine(ctx, c, ns, "m2")
	require.NoError(t, err)
	assert.Empty(t, name)

	require.NoError(t, s.Delete(ctx, "m1"))
	require.NoError(t, s.Delete(ctx, "m1"))
	_, err = s.Get(ctx, "m1")
	assert.ErrorIs(t, err, remediation.ErrNotFound)
	var gone clusterv1.Machine
	assert.Error(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "m1"}, &gone))
}
