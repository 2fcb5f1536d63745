package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestHostOfMachineDeletedIsNotFound (review 40h): HostOfMachine of a
// Machine that is gone wraps remediation.ErrNotFound (it has no host to
// ask for), not only the API's not-found error, which the remediation's
// abandon took for a failure to retry for ever.
func TestHostOfMachineDeletedIsNotFound(t *testing.T) {
	needAPIServer(t)
	c := adminClient(t)
	ns := newNamespace(t, c)
	_, err := HostOfMachine(context.Background(), c, ns, "gone")
	require.ErrorIs(t, err, remediation.ErrNotFound)
}

// TestRemediationDeletedReleasedMachineFreesHost (review 40h): a Machine
// whose request holds its BareMetalHost is deleted mid-remediation and
// its host released (consumerRef cleared), so HostOf can no longer name
// it: the request is removed from the host recorded with its admission
// (read back from the admission ConfigMap), and only then is the
// admission released. Ground truth: the BareMetalHost read from the API
// server.
func TestRemediationDeletedReleasedMachineFreesHost(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-d")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "md-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "md", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err := rem.Reconcile(ctx, "md")
	require.NoError(t, err)
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"md"}, adm.Machines)
	require.Equal(t, "host-d", adm.Requests["md"].Host, "the request is recorded with the admission")
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	require.Equal(t, adm.Requests["md"].Value, bmh.Annotations[remediation.RebootAnnotation], "precondition: the request holds host-d")

	bmh.Spec.ConsumerRef = nil
	require.NoError(t, c.Update(ctx, &bmh))
	require.NoError(t, c.Delete(ctx, m))
	for i := 0; i < 3; i++ {
		_, err = rem.Reconcile(ctx, "md")
		t.Logf("pass: %v", err)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	_, held := bmh.Annotations[remediation.RebootAnnotation]
	adm, err = (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	assert.False(t, held, "the deleted Machine's request is removed from host-d (annotations %v)", bmh.Annotations)
	assert.Empty(t, adm.Machines, "its admission is released once the request is gone")
	assert.Empty(t, adm.Requests)
}

// TestAdmissionsReadOldFormat: an admission ConfigMap written before the
// requests were recorded (only "machines") reads as those Machines with
// no request, and the next write keeps working.
func TestAdmissionsReadOldFormat(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rebootkit-remediation-admissions"},
		Data: map[string]string{"machines": `["m1"]`}}))
	s := &Admissions{Client: c, Namespace: ns}
	a, err := s.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, a.Machines)
	assert.Empty(t, a.Requests)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", at), At: at, Host: "h1"}}
	require.NoError(t, s.PutAdmissions(ctx, a))
	got, err := s.GetAdmissions(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"m1"}, got.Machines)
	assert.Equal(t, "h1", got.Requests["m1"].Host)
	assert.True(t, got.Requests["m1"].At.Equal(at))
}
