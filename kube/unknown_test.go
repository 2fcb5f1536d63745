package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/nodereuse"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// setFuture writes FutureField into spec (and status, where the object
// has a status subresource) as a newer controller would.
func setFuture(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u))
	require.NoError(t, unstructured.SetNestedField(u.Object, "spec-"+name, "spec", FutureField))
	require.NoError(t, c.Update(ctx, u))
	if gvk == bmhGVK { // the fields the BareMetalHost schema requires in status
		require.NoError(t, unstructured.SetNestedField(u.Object, "", "status", "errorMessage"))
		require.NoError(t, unstructured.SetNestedField(u.Object, "OK", "status", "operationalStatus"))
		require.NoError(t, unstructured.SetNestedField(u.Object, true, "status", "poweredOn"))
		require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"state": "provisioned", "ID": ""}, "status", "provisioning"))
	}
	require.NoError(t, unstructured.SetNestedField(u.Object, "status-"+name, "status", FutureField))
	require.NoError(t, c.Status().Update(ctx, u))
}

func checkFuture(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name, after string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u))
	for _, part := range []string{"spec", "status"} {
		v, _, _ := unstructured.NestedString(u.Object, part, FutureField)
		assert.Equal(t, part+"-"+name, v, "%s.%s of %s after %s", part, FutureField, name, after)
	}
}

var (
	bmhGVK     = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}
	machineGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
)

// TestWritesKeepUnknownFields (issue 28, A2): the CRDs carry a field the
// pinned APIs lack (FutureField, as a newer operator's); every store write
// keeps it, and PutAdmissions keeps the ConfigMap's other content. On the
// old code (an Update of the typed object read) every write wiped it.
func TestWritesKeepUnknownFields(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h1")
	setFuture(t, c, bmhGVK, ns, "h1")

	hosts := &RebootHosts{Client: c, Namespace: ns}
	h, err := hosts.Get(ctx, "h1")
	require.NoError(t, err)
	h.Annotations = map[string]string{reboot.AnnotationPrefix + "k": ""}
	h.Status.PendingRebootSince = time.Unix(1700000000, 0).UTC()
	_, err = hosts.Update(ctx, h)
	require.NoError(t, err)
	checkFuture(t, c, bmhGVK, ns, "h1", "RebootHosts.Update")

	reuse := &ReuseHosts{Client: c, Namespace: ns}
	version := func() string {
		hs, err := reuse.List(ctx)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		return hs[0].Version
	}
	require.NoError(t, reuse.SetLabel(ctx, "h1", version(), "x"))
	checkFuture(t, c, bmhGVK, ns, "h1", "ReuseHosts.SetLabel")
	require.NoError(t, reuse.Claim(ctx, "h1", version(), "m-1", true))
	checkFuture(t, c, bmhGVK, ns, "h1", "ReuseHosts.Claim")
	hs, err := reuse.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, "m-1", hs[0].ConsumerRef)
	assert.NotContains(t, hs[0].Labels, nodereuse.Label)
	assert.Equal(t, "x", hs[0].Labels["app"], "other labels kept")

	m := newMachine(t, c, ns, "m1", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: "", "theirs": "kept"}
	require.NoError(t, c.Update(ctx, m))
	setFuture(t, c, machineGVK, ns, "m1")
	ms := &Machines{Client: c, Namespace: ns}
	rec, err := ms.Get(ctx, "m1")
	require.NoError(t, err)
	require.NoError(t, ms.SaveState(ctx, "m1", rec.Version, remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1}))
	checkFuture(t, c, machineGVK, ns, "m1", "Machines.SaveState")
	require.NoError(t, ms.RemoveNeedsRemediation(ctx, "m1"))
	checkFuture(t, c, machineGVK, ns, "m1", "Machines.RemoveNeedsRemediation")
	rec, err = ms.Get(ctx, "m1")
	require.NoError(t, err)
	assert.False(t, rec.Machine.NeedsRemediation)
	assert.Equal(t, 1, rec.State.Attempt)

	// The admissions ConfigMap: labels, annotations, owner references and
	// other keys survive.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	require.NoError(t, c.Create(ctx, owner))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adm", Labels: map[string]string{"l": "1"},
		Annotations:     map[string]string{"a": "1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}}},
		Data: map[string]string{"other": "kept"}}
	require.NoError(t, c.Create(ctx, cm))
	adm := &Admissions{Client: c, Namespace: ns, Name: "adm"}
	a, err := adm.GetAdmissions(ctx)
	require.NoError(t, err)
	a.Machines = []string{"m1"}
	require.NoError(t, adm.PutAdmissions(ctx, a))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	assert.Equal(t, "1", cm.Labels["l"])
	assert.Equal(t, "1", cm.Annotations["a"])
	assert.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "kept", cm.Data["other"])
	a, err = adm.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, a.Machines)
}
