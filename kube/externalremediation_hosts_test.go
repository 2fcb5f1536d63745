package kube

import (
	"context"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// TestExternalRemediationHostsEntryNeedsTrustedSource: a
// hostMapping.hosts entry (the checker role's spec) is used only where a
// source the checker cannot write confirms it: the host's annotation
// under a known key, the Node's label in the node-restriction domain, or
// the controller owner's Hosts map; otherwise ErrNoHost, saying the fix.
// The controller's map alone, without any hostMapping, finds the host,
// and a spec entry that disagrees with it is refused.
func TestExternalRemediationHostsEntryNeedsTrustedSource(t *testing.T) {
	ctx := context.Background()
	const ns = "hosts"
	bmh := func(name string, ann map[string]string) *metal3.BareMetalHost {
		return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	rem := func(n string, hm *v1alpha1.HostMapping) *v1alpha1.PowerCycleRemediation {
		return &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			Spec: v1alpha1.PowerCycleRemediationSpec{HostMapping: hm}}
	}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(
		bmh("h0", nil), bmh("h1", map[string]string{DefaultHostAnnotation: "n1"}), bmh("h2", nil), bmh("h3", nil),
		node("n0", nil), node("n1", nil), node("n2", map[string]string{DefaultHostLabel: "h2", "kubelet-writable/host": "h0"}),
		node("n3", map[string]string{"kubelet-writable/host": "h3"}),
	).Build()
	s := &ExternalRemediations{Client: c, Namespace: ns, Hosts: map[string]string{"n3": "h3"}}
	spec := func(n, h string) *v1alpha1.HostMapping { return &v1alpha1.HostMapping{Hosts: map[string]string{n: h}} }

	// Spec alone: refused, with the fix.
	_, err := s.FindHost(ctx, rem("n0", spec("n0", "h0")))
	require.ErrorIs(t, err, ErrNoHost)
	assert.Contains(t, err.Error(), "--hosts")
	assert.Contains(t, err.Error(), DefaultHostAnnotation+"=n0")
	// A label the kubelet can write confirms nothing.
	_, err = s.FindHost(ctx, rem("n0", &v1alpha1.HostMapping{Hosts: map[string]string{"n0": "h0"}, Label: "kubelet-writable/host"}))
	require.ErrorIs(t, err, ErrNoHost)

	// Confirmed by the host's annotation.
	h, err := s.FindHost(ctx, rem("n1", spec("n1", "h1")))
	require.NoError(t, err)
	assert.Equal(t, "h1", h)
	// Confirmed by the Node's node-restriction label.
	h, err = s.FindHost(ctx, rem("n2", spec("n2", "h2")))
	require.NoError(t, err)
	assert.Equal(t, "h2", h)
	// The controller's map, with no hostMapping at all.
	h, err = s.FindHost(ctx, rem("n3", nil))
	require.NoError(t, err)
	assert.Equal(t, "h3", h)
	// The controller's map and the spec disagree: refused.
	_, err = s.FindHost(ctx, rem("n3", spec("n3", "h0")))
	require.ErrorIs(t, err, ErrNoHost)
	// The controller's map is still cross-checked: h1's annotation names n1.
	s.Hosts["n0"] = "h1"
	_, err = s.FindHost(ctx, rem("n0", nil))
	require.ErrorIs(t, err, ErrNoHost)
}
