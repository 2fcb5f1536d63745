package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_DeletedMachineOnOperatorHostLeavesRequest: doc.go
// (remediation): "a Machine deleted mid-remediation (its State goes with
// it) has the request removed from that host, whatever HostOf answers
// then ("", another host, an error wrapping ErrNotFound), so the reboot
// controller powers the host on, and only then its admission released".
// With the default Ownership (a baremetal-operator runs and the host is
// not detached), NewRemediationReconciler's OwnedHosts drives the host
// through OperatorHosts, whose Get never names the host (Host.Name ""):
// State.Host stays "" and no request is recorded with the admission
// (reconciler.go: record needs attempt.Host). When the Machine is
// deleted, abandon falls back to RemoveRebootAnnotation, OwnedHosts.pick
// asks HostOfMachine, which now wraps ErrNotFound for a deleted Machine
// (machines.go:216), and abandon takes ErrNotFound as "nothing to
// release" (reconciler.go abandon): the admission is released while the
// operator's reboot annotation is still on the BareMetalHost: the
// baremetal-operator holds the host off for good. Ground truth: the
// BareMetalHost read from the API server.
func TestReview40_DeletedMachineOnOperatorHostLeavesRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-op")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mo-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "mo", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	rem := NewRemediationReconciler(c, ns, Ownership{}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err := rem.Reconcile(ctx, "mo")
	require.NoError(t, err)
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"mo"}, adm.Machines, "precondition: admitted")
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	_, held := bmh.Annotations[remediation.RebootAnnotation]
	require.True(t, held, "precondition: the operator's reboot annotation holds host-op")
	t.Logf("admission requests after the start: %+v", adm.Requests)

	// The Machine is deleted mid-remediation (its owner scaled down, or a
	// person deleted it); its host keeps its consumerRef for now.
	require.NoError(t, c.Delete(ctx, m))
	for i := 0; i < 3; i++ {
		_, err = rem.Reconcile(ctx, "mo")
		t.Logf("pass: %v", err)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	_, held = bmh.Annotations[remediation.RebootAnnotation]
	adm, err = (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	if held && !adm.Has("mo") {
		t.Fatalf("deleted Machine mo's admission is released (%v) while its reboot request still holds host-op off (annotations %v): "+
			"the baremetal-operator keeps it off for good and the storm guard counts it no more", adm.Machines, bmh.Annotations)
	}
	require.False(t, held, "the deleted Machine's request is removed from host-op (annotations %v)", bmh.Annotations)
}

// TestReview40_OldFormatAdmissionDeletedMachineLeavesRequest: doc.go
// (remediation): "An admission record written before Requests existed
// names no request: then the host the HostStore resolves for the deleted
// Machine is asked, and HostOf must keep answering for it." The kube
// module's own HostOf, HostOfMachine, does not: for a deleted Machine it
// wraps ErrNotFound, which abandon takes as "no host, nothing to
// release". A remediation in flight across the upgrade (its admission
// ConfigMap in the old format: only "machines"; passes that only wait
// write no request, so nothing records one) whose Machine is then deleted
// has its admission released while its request still holds the host
// (rebootkit's: the RebootController keeps it off for good), although
// the host still names the Metal3Machine as its consumer.
func TestReview40_OldFormatAdmissionDeletedMachineLeavesRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-old")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mold-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "mold", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	rem := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err := rem.Reconcile(ctx, "mold")
	require.NoError(t, err)
	// The admission as the previous version wrote it: only "machines".
	var cm corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rebootkit-remediation-admissions"}, &cm))
	delete(cm.Data, "requests")
	require.NoError(t, c.Update(ctx, &cm))
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	_, held := bmh.Annotations[remediation.RebootAnnotation]
	require.True(t, held, "precondition: the request holds host-old")

	require.NoError(t, c.Delete(ctx, m))
	for i := 0; i < 3; i++ {
		_, err = rem.Reconcile(ctx, "mold")
		t.Logf("pass: %v", err)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	_, held = bmh.Annotations[remediation.RebootAnnotation]
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	if held && !adm.Has("mold") {
		t.Fatalf("deleted Machine mold (old-format admission) is released (%v) while its request still holds host-old (annotations %v, consumerRef %v)",
			adm.Machines, bmh.Annotations, bmh.Spec.ConsumerRef)
	}
	require.False(t, held, "the deleted Machine's request is removed from host-old (annotations %v)", bmh.Annotations)
}

// TestReview40_MovedFromOurHostToOperatorHostLeavesOldRequest: doc.go
// (remediation): "A Machine whose host changes while its request holds
// the old one (moved, re-provisioned) has that request removed first;
// only once it is gone is a new request written to the new host ...:
// never two hosts held at once." With OwnedHosts (the kube module's
// HostStore) and an Ownership that gives rebootkit some hosts (here by
// the Unmanaged selector) and the operator the rest, a Machine whose
// request holds h-ours (State.Host "h-ours") and that is moved to
// h-op, the operator's: OwnedHosts.Get picks the store by HostOf's host
// and delegates to OperatorHosts.Get, which ignores req.Host (it reads
// HostOf's host) and names no host (Host.Name ""), so Decide sees no
// move (moved() needs Host.Name), finds h-op without the attempt's
// request and writes a new one there, persisting State.Host "" (request()
// sets st.Host = o.Host.Name): the request on h-ours is forgotten by the
// State and by the admission record, never removed; both hosts are held,
// h-ours for good (the RebootController holds it off while the
// annotation is there). Ground truth: the BareMetalHosts read from the
// API server.
func TestReview40_MovedFromOurHostToOperatorHostLeavesOldRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	ours := newBMH(t, c, ns, "h-ours")
	ours.Labels["rk"] = "ours"
	ours.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mv-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, ours))
	op := newBMH(t, c, ns, "h-op")
	m := newMachine(t, c, ns, "mv", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	sel, err := labels.Parse("rk=ours")
	require.NoError(t, err)
	rem := NewRemediationReconciler(c, ns, Ownership{Unmanaged: sel}, remediation.Config{Timeout: time.Hour, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	_, err = rem.Reconcile(ctx, "mv")
	require.NoError(t, err)
	rec, err := rem.Machines.Get(ctx, "mv")
	require.NoError(t, err)
	require.Equal(t, "h-ours", rec.State.Host, "precondition: the request is written to h-ours")
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ours), &bmh))
	first := bmh.Annotations[remediation.RebootAnnotation]
	require.NotEmpty(t, first, "precondition: the request holds h-ours")

	// The Machine moves to h-op (its Metal3Machine now consumes h-op).
	bmh.Spec.ConsumerRef = nil
	require.NoError(t, c.Update(ctx, &bmh))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), &bmh))
	bmh.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mv-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, &bmh))
	for i := 0; i < 4; i++ {
		_, err = rem.Reconcile(ctx, "mv")
		rec, _ = rem.Machines.Get(ctx, "mv")
		t.Logf("pass: err=%v phase=%s host=%q", err, rec.State.Phase, rec.State.Host)
	}
	var hOurs, hOp metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ours), &hOurs))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), &hOp))
	_, heldOurs := hOurs.Annotations[remediation.RebootAnnotation]
	_, heldOp := hOp.Annotations[remediation.RebootAnnotation]
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	t.Logf("state host %q, admission requests %+v", rec.State.Host, adm.Requests)
	if heldOurs && heldOp {
		t.Fatalf("Machine mv holds two hosts: h-ours (%s, its old request, State.Host now %q) and h-op (%s)",
			hOurs.Annotations[remediation.RebootAnnotation], rec.State.Host, hOp.Annotations[remediation.RebootAnnotation])
	}
	if heldOurs && rec.State.Host != "h-ours" && adm.Requests["mv"].Host != "h-ours" {
		t.Fatalf("h-ours still holds mv's old request but neither its State (host %q) nor its admission (%+v) names h-ours any more: it is never removed",
			rec.State.Host, adm.Requests["mv"])
	}
}

// TestReview40_OwnedHostsAddIgnoresRequestHost: remediation.State.Host is
// "the host the attempt's current reboot request was written to
// (persisted before it is written)", and the Reconciler writes the
// request with that host (Request.Host); remediation.RebootAPIHosts writes
// it there (hostFor). OwnedHosts.AddRebootAnnotation instead picks the
// store, and the host, by asking HostOf again at write time
// (operator.go OwnedHosts.AddRebootAnnotation: s.pick(ctx, machine),
// then OperatorHosts.patch by HostOf): a Machine moved between the pass's
// read and its write gets its request on a host neither its State nor
// its admission record names, which is never read or removed by them (a
// deleted Machine's abandon removes the recorded host's request and
// releases, the operator holds the other host off for good).
func TestReview40_OwnedHostsAddIgnoresRequestHost(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	ours := newBMH(t, c, ns, "h-ours")
	ours.Labels["rk"] = "ours"
	require.NoError(t, c.Update(ctx, ours))
	op := newBMH(t, c, ns, "h-op")
	op.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mw-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, op))
	newMachine(t, c, ns, "mw", false)
	sel, err := labels.Parse("rk=ours")
	require.NoError(t, err)
	rem := NewRemediationReconciler(c, ns, Ownership{Unmanaged: sel}, remediation.Config{}, remediation.MaxCount(1), time.Now)
	now := time.Now()
	req := remediation.Request{Value: remediation.RebootValue("uid-mw", now), At: now, Host: "h-ours"}
	err = rem.Hosts.AddRebootAnnotation(ctx, "mw", req)
	t.Logf("AddRebootAnnotation: %v", err)
	var hOurs, hOp metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ours), &hOurs))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), &hOp))
	if v, ok := hOp.Annotations[remediation.RebootAnnotation]; ok {
		t.Fatalf("the request for host h-ours (Request.Host) was written to h-op, the host HostOf names at write time (%s); h-ours has %q", v, hOurs.Annotations[remediation.RebootAnnotation])
	}
	require.Equal(t, req.Value, hOurs.Annotations[remediation.RebootAnnotation], "the request is written to Request.Host")
}
