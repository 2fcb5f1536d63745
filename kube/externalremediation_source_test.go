package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// TestExternalRemediationSourceSwap: a remediation whose host was found
// for Machine m0 (no nodeRef then) is cancelled, and names no Node, when
// its checker swaps the owner for a node-name annotation, moves it to
// another Machine, or points it at a Machine of the same name with
// another UID; with its recorded owner unchanged, the Node that
// registers later is read from that Machine.
func TestExternalRemediationSourceSwap(t *testing.T) {
	ctx := context.Background()
	const ns = "src"
	m0 := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m0", UID: "uid-m0"}}
	m0.Status.NodeRef = clusterv1.MachineNodeReference{Name: "n0"}
	m1 := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1", UID: "uid-m1"}}
	m1.Status.NodeRef = clusterv1.MachineNodeReference{Name: "n1"}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(m0, m1,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}).Build()
	s := &ExternalRemediations{Client: c, Namespace: ns}
	owned := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: types.UID(uid)}}
	}
	rem := func(owners []metav1.OwnerReference, ann map[string]string) *v1alpha1.PowerCycleRemediation {
		r := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m0", OwnerReferences: owners, Annotations: ann}}
		r.Status.Host = "h0"
		r.Status.Source = v1alpha1.HostSource{Machine: "m0", MachineUID: "uid-m0"}
		return r
	}
	v, err := s.nodeOf(ctx, rem(owned("m0", "uid-m0"), nil))
	require.NoError(t, err)
	assert.Equal(t, nodeView{Name: "n0"}, v, "the recorded Machine's late nodeRef")

	for name, r := range map[string]*v1alpha1.PowerCycleRemediation{
		"annotation instead of owner": rem(nil, map[string]string{v1alpha1.NodeNameAnnotation: "n1"}),
		"another Machine":             rem(owned("m1", "uid-m1"), nil),
		"same name, another UID":      rem(owned("m0", "uid-other"), nil),
	} {
		v, err := s.nodeOf(ctx, r)
		require.NoError(t, err, name)
		assert.Empty(t, v.Name, "%s: no Node is acted on", name)
		assert.NotEmpty(t, v.Renamed, "%s: cancelled", name)
		rec, err := s.record(ctx, r)
		require.NoError(t, err, name)
		assert.False(t, rec.Machine.NeedsRemediation, name)
	}
}
