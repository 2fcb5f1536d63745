package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40j_OldRecordSweepLeavesPowerCycleRemediationRequest: the
// sweep that still runs for an admission record written before requests
// were recorded (a gone Machine, no recorded request, no host HostOf
// resolves) removes the requests no existing Machine owns, but never one
// naming a live PowerCycleRemediation (the ExternalRemediationController's
// request on the same annotation). Before the fix OwnedHosts.RebootRequests
// listed it and the sweep removed it. Ground truth: the BareMetalHost read
// from the API server.
func TestReview40j_OldRecordSweepLeavesPowerCycleRemediationRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	pcr := &v1alpha1.PowerCycleRemediation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}
	require.NoError(t, c.Create(ctx, pcr))
	p := newBMH(t, c, ns, "host-p")
	pcrValue := remediation.RebootValue(string(pcr.UID), time.Now())
	p.Annotations = map[string]string{remediation.RebootAnnotation: pcrValue}
	require.NoError(t, c.Update(ctx, p))
	// mx's request on host-x, its admission in the old format.
	hx := newBMH(t, c, ns, "host-x")
	hx.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mx-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, hx))
	m := newMachine(t, c, ns, "mx", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err := rem.Reconcile(ctx, "mx")
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rebootkit-remediation-admissions"}, &cm))
	delete(cm.Data, "requests")
	delete(cm.Data, "members")
	require.NoError(t, c.Update(ctx, &cm))
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hx), &bmh))
	_, held := bmh.Annotations[remediation.RebootAnnotation]
	require.True(t, held, "precondition: mx's request holds host-x")

	require.NoError(t, c.Delete(ctx, m))
	for i := 0; i < 3; i++ {
		_, err = rem.Reconcile(ctx, "mx")
		t.Logf("pass: %v", err)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hx), &bmh))
	_, held = bmh.Annotations[remediation.RebootAnnotation]
	require.False(t, held, "the old record's sweep removes gone mx's request from host-x (annotations %v)", bmh.Annotations)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), &bmh))
	if v, ok := bmh.Annotations[remediation.RebootAnnotation]; !ok || v != pcrValue {
		t.Fatalf("the old record's sweep for deleted Machine mx removed host-p's request (now %q, present %v), which belongs to live PowerCycleRemediation r1", v, ok)
	}
}
