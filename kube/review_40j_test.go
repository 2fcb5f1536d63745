package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40j_OrphanSweepRemovesOtherControllersRequest: remediation's
// doc: for a gone Machine with no recorded request whose host the
// HostStore no longer resolves, "the requests no existing Machine owns
// are removed first when the HostStore is a RequestFinder (the kube
// module's is)". OwnedHosts.RebootRequests lists the reboot annotation of
// every BareMetalHost of the namespace, and removeOrphans
// (reconciler.go) removes each whose owner UID is not the UID of a
// Cluster API Machine (Machines.List). But the same annotation, on the
// same hosts, carries the ExternalRemediationController's live requests,
// whose "machine" is a PowerCycleRemediation's UID
// (externalremediation.go: Machine{UID: string(r.UID)}), never a
// Machine's: the Machine controller removes them, and the reboot
// controller powers that host on in the middle of another controller's
// fencing. Trigger without any old record: a Machine admitted while it
// has no host (Host.Missing: admitted, no request written, none recorded)
// and then deleted. Ground truth: the BareMetalHost read from the API
// server.
func TestReview40j_OrphanSweepRemovesOtherControllersRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	// host-p is held off by a PowerCycleRemediation's request (the
	// external controller's value names the remediation object's UID).
	p := newBMH(t, c, ns, "host-p")
	pcrValue := remediation.RebootValue("uid-of-powercycleremediation-r1", time.Now())
	p.Annotations = map[string]string{remediation.RebootAnnotation: pcrValue}
	require.NoError(t, c.Update(ctx, p))

	// Machine mx has no host yet: its remediation is admitted and waits.
	m := newMachine(t, c, ns, "mx", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err := rem.Reconcile(ctx, "mx")
	require.NoError(t, err)
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"mx"}, adm.Machines, "precondition: mx is admitted")
	require.Empty(t, adm.Requests, "precondition: no request was written or recorded (no host)")

	// mx is deleted (its owner replaces it); the controller's pass abandons it.
	require.NoError(t, c.Delete(ctx, m))
	for i := 0; i < 2; i++ {
		_, err = rem.Reconcile(ctx, "mx")
		t.Logf("pass: %v", err)
	}
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), &bmh))
	if v, ok := bmh.Annotations[remediation.RebootAnnotation]; !ok || v != pcrValue {
		t.Fatalf("abandoning deleted Machine mx (which never wrote a request) removed host-p's reboot request (now %q, present %v), which belongs to a live PowerCycleRemediation, not to any Machine: the reboot controller powers host-p on mid-fencing", v, ok)
	}
}

// TestReview40j_OneBadStateAnnotationStopsEveryRemediation: every byte
// a client may write is hostile. Machines.List (machines.go
// machineRecord) fails as a whole when one Machine's
// remediation.rebootkit.io/state annotation does not parse, and the
// Reconciler needs List for the storm guard of every Machine that would
// start: one Machine whose annotation anyone with patch rights on
// Machines (or an older or newer writer) set to bytes that are not a
// State stops every remediation of the namespace, for as long as it
// stays, while that Machine itself is healthy. Ground truth: the
// unhealthy Machine's host, read from the API server, never gets a
// reboot request.
func TestReview40j_OneBadStateAnnotationStopsEveryRemediation(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-a")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "ma-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	ma := newMachine(t, c, ns, "ma", false)
	ma.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, ma))
	mb := newMachine(t, c, ns, "mb", false) // healthy, its state annotation garbled
	mb.Annotations = map[string]string{RemediationStateAnnotation: "not a state"}
	require.NoError(t, c.Update(ctx, mb))

	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	for i := 0; i < 3; i++ {
		_, err := rem.Reconcile(ctx, "ma")
		t.Logf("pass over ma: %v", err)
	}
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	if _, ok := bmh.Annotations[remediation.RebootAnnotation]; !ok {
		t.Fatalf("unhealthy ma's remediation never starts (host-a has no reboot request: %v) because healthy mb's state annotation does not parse: Machines.List fails as a whole", bmh.Annotations)
	}
}
