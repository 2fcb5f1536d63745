package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41k_HostsOnlyMappingTrustsCheckerSpec: the README offers
// hostMapping.hosts as a mapping of its own ("or list them under
// hostMapping.hosts"), and doc.go says the known keys "never depend on
// the remediation's spec alone (the checker role writes it)". But when the
// BareMetalHosts carry no DefaultHostAnnotation and the Nodes no
// DefaultHostLabel (what a hosts-only user has), the cross-check finds
// nothing to compare and the spec's hosts entry is trusted as written by
// whoever holds the checker role (create on powercycleremediations, no
// right on BareMetalHosts or Nodes): a remediation of n0 mapped to h1
// powers off h1 (whose Node n1 is healthy) and deletes n0 while h0, its
// real host, runs. Ground truth: h1's fake power and the groundFence over
// the Node deletion.
func TestReview41k_HostsOnlyMappingTrustsCheckerSpec(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	// A hosts-only deployment: no host annotation on the BareMetalHosts.
	for _, h := range []string{"h0", "h1"} {
		var bmh metal3.BareMetalHost
		require.NoError(t, e.direct.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: h}, &bmh))
		delete(bmh.Annotations, DefaultHostAnnotation)
		require.NoError(t, e.direct.Update(e.ctx, &bmh))
	}
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	start := time.Now()
	// The checker role's own remediation (not the admin's template, which
	// maps n0 to h0).
	spec := v1alpha1.PowerCycleRemediationSpec{Timeout: &metav1.Duration{Duration: time.Minute},
		HostMapping: &v1alpha1.HostMapping{Hosts: map[string]string{n0: "h1"}}}
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       spec}))
	deadline := start.Add(10 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"h1 (Node %s, healthy) was powered off for the remediation of %s on the checker role's word alone (spec.hostMapping.hosts)\n%s",
		e.nodeOf["h1"], n0, e.dump())
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn, "a Node was deleted while its host ran")
}

// TestReview41k_MachineWithoutNodeRefRenamedMidway: status.nodeName is
// "frozen with the host" only when the owning Machine had a nodeRef when
// the host was found. A Machine that has none (Cluster API's
// NodeStartupTimeout remediates exactly those) records host h0 and no
// Node; every SaveState after that takes the Node its checker names now
// (nodeOf: cmp.Or(status.nodeName, now), SaveState records it "once").
// A checker-role identity (update on powercycleremediations) that moves
// the remediation's owner reference to Machine m1 (nodeRef n1) while h0
// is powering off makes rebootkit fence n1 on h0's evidence: n1 is
// deleted while h1 runs. The rename of a1a952a cancels only when
// status.nodeName was recorded. Ground truth: h1's fake power over the
// Node deletion call (groundFence).
func TestReview41k_MachineWithoutNodeRefRenamedMidway(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	e.hw["h0"].SetConfig(fake.PowerConfig{Lag: 1500 * time.Millisecond}) // the move lands before h0's fence
	ctx := e.ctx
	for _, h := range []string{"h0", "h1"} {
		bmh := newBMHRef(e.ns, h)
		require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
		bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m" + h[1:] + "-m3m", Namespace: e.ns}
		require.NoError(t, e.direct.Update(ctx, bmh))
	}
	m0 := newMachine(t, e.direct, e.ns, "m0", false) // no nodeRef: its Node never joined
	m1 := newMachine(t, e.direct, e.ns, "m1", false)
	n1 := e.nodeOf["h1"]
	m1.Status.NodeRef = clusterv1.MachineNodeReference{Name: n1}
	require.NoError(t, e.direct.Status().Update(ctx, m1))
	e.blockKubelet("h0")
	require.NoError(t, e.direct.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.nodeOf["h0"]}}))

	require.NoError(t, e.checker.Create(ctx, &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m0.Name, UID: m0.UID}}},
		Spec: workerSpec(time.Minute)}))
	e.eventually("host recorded", 10*time.Second, func() bool {
		r := e.remediationOf("m0")
		return r != nil && r.Status.Host == "h0"
	})
	r := e.remediationOf("m0")
	assert.Empty(t, r.Status.NodeName)
	base := r.DeepCopy()
	r.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m1.Name, UID: m1.UID}}
	require.NoError(t, e.checker.Patch(ctx, r, client.MergeFrom(base)))

	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, whileOn := e.fc.counts(); len(whileOn) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, whileOn := e.fc.counts()
	got := e.remediationOf("m0")
	assert.Empty(t, whileOn, "a Node was deleted while its host ran: the remediation of h0 (status.host) fenced %s, the Node of the "+
		"Machine it is owned by now (status.nodeName=%q)\n%s", n1, got.Status.NodeName, e.dump())
	assert.True(t, e.hw["h1"].HardwareOn())
}
