package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41j_MachineWhoseNodeIsGoneNeverRemediated: Cluster API's
// MachineHealthCheck finds a Machine unhealthy as soon as its Node is gone
// (nodeRef set, Node not found: NodeNotFound; the test's own MHC driver,
// externalremediation_checkers_test.go, creates the remediation for a
// "missing" Node too), e.g. an operator ran kubectl delete node on the
// NotReady Node of a hung host. Since a1a952a ExternalRemediations.List
// leaves out a remediation whose Node does not exist unless it is in
// flight, so the candidate is not in the storm guard's fleet and MayStart
// refuses it for ever ("machine m0 is not in the fleet"): the hung host is
// never power-cycled, and MachineHealthCheck has no timeout to escalate.
// Before the change the same remediation was a member and ran. Ground
// truth: h0's fake power.
func TestReview41j_MachineWhoseNodeIsGoneNeverRemediated(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1", "h2"}, remediation.MaxCount(2))
	ctx := context.Background()
	bmh := newBMHRef(e.ns, "h0")
	require.NoError(t, e.direct.Get(ctx, clientKey(bmh), bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "m0-m3m", Namespace: e.ns}
	require.NoError(t, e.direct.Update(ctx, bmh))
	m := newMachine(t, e.direct, e.ns, "m0", false)
	node := e.nodeOf["h0"]
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	require.NoError(t, e.direct.Status().Update(ctx, m))
	e.hang("h0") // hung: its kubelet registers nothing until a power cycle
	require.NoError(t, e.direct.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
	e.eventually("node deleted", 10*time.Second, func() bool { return e.nodeGone("h0") })

	start := time.Now()
	r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: workerSpec(time.Minute)}
	require.NoError(t, e.checker.Create(ctx, r))
	deadline := start.Add(15 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h0"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	assert.True(t, e.hw["h0"].WasOffDuring(start, time.Now()),
		"the hung host h0 of Machine m0 (its Node %s gone, 1 unhealthy of 3 under MaxCount(2)) was not power-cycled within 15 s\n%s",
		node, e.dump())
}

// TestReview41j_HostsMapCrossCheckKeysFromSpec: the cross-check of
// hostMapping.hosts (a1a952a, mappedHost) reads the BareMetalHosts'
// annotation and the Node's label under the keys the same spec names
// (hostMapping.hostAnnotation, hostMapping.label): the spec "travels in
// the remediation's spec, which the checker role writes" (the fix's own
// comment), so the same identity, or a template that lists hosts only,
// leaves the keys out and nothing is cross-checked. The BareMetalHosts
// here carry the annotation naming their Node (h1's names n1, Ready);
// a remediation of n0 whose spec maps n0 to h1 and names no key powers off
// h1 and deletes n0 while h0, its real host, runs. Ground truth: h1's fake
// power and the groundFence over n0's deletion.
func TestReview41j_HostsMapCrossCheckKeysFromSpec(t *testing.T) {
	e := newExtEnv(t, []string{"h0", "h1"}, remediation.MaxCount(2))
	n0 := e.nodeOf["h0"]
	e.hang("h0")
	start := time.Now()
	spec := v1alpha1.PowerCycleRemediationSpec{Timeout: &metav1.Duration{Duration: time.Minute},
		HostMapping: &v1alpha1.HostMapping{Hosts: map[string]string{n0: "h1"}}} // h1's annotation names n1
	require.NoError(t, e.checker.Create(e.ctx, &v1alpha1.PowerCycleRemediation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n0, Annotations: map[string]string{v1alpha1.NodeNameAnnotation: n0}},
		Spec:       spec}))
	deadline := start.Add(10 * time.Second)
	for time.Now().Before(deadline) && !e.hw["h1"].WasOffDuring(start, time.Now()) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	assert.False(t, e.hw["h1"].WasOffDuring(start, time.Now()),
		"h1, whose BareMetalHost annotation %q names %s (Ready), was powered off for the remediation of %s: the hosts entry is "+
			"cross-checked only under keys the same spec chooses\n%s", hostNodeAnnotation, e.nodeOf["h1"], n0, e.dump())
	_, whileOn := e.fc.counts()
	assert.Empty(t, whileOn, "a Node was deleted while its host ran")
}
