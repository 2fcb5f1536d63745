package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestRemediationHostGoneEscalates (issue 28, A4): a Machine's
// BareMetalHost is released (consumerRef cleared) and then deleted in the
// middle of its remediation: the attempt times out, escalates (the Machine,
// owned by a MachineSet, is deleted for its owner to replace) and releases
// its admission. On the old code "no host" became "" and every pass failed
// before the decision, where the timeout lives: it never ended.
func TestRemediationHostGoneEscalates(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-g")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mg-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "mg", false)
	// Owned by a MachineSet (no garbage collector runs in the test).
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: "ms",
		UID: types.UID("ms-uid"), Controller: ptr.To(true)}}
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))

	now := time.Now
	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: 2 * time.Second, RetryLimit: -1, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), now)
	_, err := rem.Reconcile(ctx, "mg")
	require.NoError(t, err)
	rec, err := (&Machines{Client: c, Namespace: ns}).Get(ctx, "mg")
	require.NoError(t, err)
	require.Equal(t, remediation.PhasePowerOffRequested, rec.State.Phase)
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"mg"}, adm.Machines)

	// The host is released, then deleted.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), h))
	h.Spec.ConsumerRef = nil
	require.NoError(t, c.Update(ctx, h))
	deadline := time.Now().Add(20 * time.Second)
	deleted := false
	for i := 0; time.Now().Before(deadline); i++ {
		if i == 3 {
			require.NoError(t, c.Delete(ctx, h))
		}
		_, err := rem.Reconcile(ctx, "mg")
		var cur clusterv1.Machine
		if gerr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "mg"}, &cur); apierrors.IsNotFound(gerr) {
			deleted = true
			break
		}
		_ = err
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, deleted, "the Machine whose host went away was escalated (deleted for its MachineSet to replace)")
	_, err = rem.Reconcile(ctx, "mg") // the deleted Machine's admission is released
	require.ErrorIs(t, err, remediation.ErrNotFound)
	adm, err = (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Empty(t, adm.Machines, "admission released")
}

// TestNodeDeleteChecksUID (issue 28, A5): the Node the remediation read
// is deleted with its UID as a precondition: a Node registered again under
// the same name since (the host came back) is another Node and is not
// deleted. On the old code the deletion carried no precondition.
func TestNodeDeleteChecksUID(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	name := fmt.Sprintf("node-uid-%d", time.Now().UnixNano())
	require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	s := &Nodes{Client: c}
	seen, err := s.Get(ctx, name)
	require.NoError(t, err)
	require.NotEmpty(t, seen.UID)
	// The kubelet registers the Node again (another UID) after a reboot.
	require.NoError(t, c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	err = s.Delete(ctx, name, seen.UID)
	assert.ErrorIs(t, err, remediation.ErrConflict)
	now, err := s.Get(ctx, name)
	require.NoError(t, err)
	assert.True(t, now.Exists, "the Node registered again is not deleted")
	assert.NotEqual(t, seen.UID, now.UID)
	require.NoError(t, s.Delete(ctx, name, now.UID))
	gone, err := s.Get(ctx, name)
	require.NoError(t, err)
	assert.False(t, gone.Exists)
}
