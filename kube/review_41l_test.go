package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41l_SameNameMachineBeforeHostFound: MachineHealthCheck created
// the remediation for Machine m0 (uid-old), owned by it. Before its host
// was found (NoHost: its Metal3Machine had no BareMetalHost yet), m0 was
// deleted and a Machine of the same name re-created (uid-new), which got
// host h-new and runs a healthy Node. The remediation is not this
// Machine's: rebootkit must not find h-new for it (and record it with the
// old UID as its source, which then never cancels). The fix of 41k
// ("another Machine of that name: its nodeRef is not this remediation's
// Node") is in nodeNow only; FindHost reads the host by name.
func TestReview41l_SameNameMachineBeforeHostFound(t *testing.T) {
	ctx := context.Background()
	const ns = "r41l"
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m0", UID: "uid-new"},
		Spec: clusterv1.MachineSpec{ClusterName: "c1",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: "m0-m3m"}}}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "n-new"}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h-new"}}
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m0-m3m", Namespace: ns}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(m, bmh,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-new"}}).Build()
	s := &ExternalRemediations{Client: c, Namespace: ns}
	r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m0", UID: types.UID("uid-old")}}}}

	h, err := s.FindHost(ctx, r)
	assert.True(t, err != nil || h == "",
		"the remediation of Machine m0 uid-old found host %q, the host of the re-created m0 (uid-new) running Node n-new", h)
}

// TestReview41l_SameNameMachinePowersOffItsRunningHost: the same on the
// API server with the controllers running. MachineHealthCheck's
// remediation of Machine m0 (NodeStartupTimeout: its Metal3Machine has no
// BareMetalHost yet) fails NoHost and is looked at every poll interval.
// m0 is then deleted and re-created under the same name (a new UID); the
// new m0 gets h1, whose Node is Ready and runs. Before the garbage
// collector removes the old remediation (its owner's UID is gone),
// rebootkit finds h1 for it, records the old UID as its source (so
// nothing ever cancels it) and power-cycles h1. Ground truth: h1's fake
// power (Truth).
func TestReview41l_SameNameMachinePowersOffItsRunningHost(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	ctx := e.ctx
	old := newMachine(t, e.direct, e.ns, "m0", false) // no BareMetalHost consumes m0-m3m yet
	require.NoError(t, e.checker.Create(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: old.Name, UID: old.UID}}},
		Spec: workerSpec(time.Minute)}))
	e.eventually("NoHost", 10*time.Second, func() bool {
		r := e.remediationOf("m0")
		return r != nil && meta.IsStatusConditionFalse(r.Status.Conditions, v1alpha1.ConditionSucceeded)
	})
	require.NoError(t, e.direct.Delete(ctx, old))
	e.eventually("old m0 gone", 10*time.Second, func() bool {
		var m clusterv1.Machine
		return e.direct.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "m0"}, &m) != nil
	})
	m := newMachine(t, e.direct, e.ns, "m0", false)
	require.NotEqual(t, old.UID, m.UID)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: e.nodeOf["h1"]}
	require.NoError(t, e.direct.Status().Update(ctx, m))
	bmh := newBMHRef(e.ns, "h1")
	require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m0-m3m", Namespace: e.ns}
	require.NoError(t, e.direct.Update(ctx, bmh))

	time.Sleep(5 * time.Second)
	r := e.remediationOf("m0")
	fences, whileOn := e.fc.counts()
	t.Logf("Node fences: %d, while the host ran: %v", fences, whileOn)
	assert.Zero(t, e.offs("h1"), "h1, the host of the re-created Machine m0 (uid %s) with its Node %s Ready, was powered off by the remediation "+
		"owned by the deleted m0 (uid %s); status.host=%q status.source=%+v\n%s", m.UID, e.nodeOf["h1"], old.UID, r.Status.Host, r.Status.Source, e.dump())
}
