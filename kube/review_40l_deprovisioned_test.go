package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40l_DeletedMachineDeprovisionedHostHeldForGood: liveness with
// the Machine's ordinary end of life. kube/doc.go: the host "is held for
// the request (... a deleted Machine's admission ...) until the operator
// shows it on in a status written after the request". A Machine deleted
// mid-remediation (its owner scales it down, or the escalation deletes
// it for replacement) has its BareMetalHost released by CAPM3: consumer
// reference cleared, spec.online set false, deprovisioned to
// "available", where the operator keeps it powered off, because its owner
// asked for that, not because of any reboot request. OperatorHosts.read
// (operator.go:204) sets OffAfterRequest from status.poweredOn alone
// (`!bmh.Status.PoweredOn && since`), so remediation.held stays true for
// as long as the host sits unused in the pool (for good, if the host is
// the broken one that was just replaced): the gone Machine's admission
// is never released, and with the storm guard's limit reached no other
// Machine is ever remediated. Ground truth: the BareMetalHost as its
// owner and the operator wrote it: spec.online false, no consumer, off,
// no reboot request on it. Fixed: such a host reads Host.Offline, not
// held.
func TestReview40l_DeletedMachineDeprovisionedHostHeldForGood(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h1")
	newBMH(t, c, ns, "h2")
	for _, h := range []string{"h1", "h2"} {
		setStatus(t, c, ns, h, func(st *metal3.BareMetalHostStatus) {
			st.PoweredOn = true
			st.Provisioning.State = metal3.StateProvisioned
			st.LastUpdated = &metav1.Time{Time: time.Now().Add(-time.Hour)}
		})
	}
	cl := fake.NewCluster()
	cl.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c"})
	cl.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	cl.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	cl.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	hostOf := func(ctx context.Context, m string) (string, error) {
		if _, err := cl.Get(ctx, m); err != nil {
			return "", err // a deleted Machine: ErrNotFound, as HostOfMachine
		}
		return map[string]string{"m1": "h1", "m2": "h2"}[m], nil
	}
	rem := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Admissions: cl, Now: time.Now,
		Hosts: &OperatorHosts{Client: c, Namespace: ns, HostOf: hostOf, StaleReads: time.Second},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Hour}}

	cl.SetNodeReady("m1", false)
	cl.SetNeedsRemediation("m1", true)
	_, err := rem.Reconcile(ctx, "m1")
	require.NoError(t, err)
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	require.Contains(t, h.Annotations, remediation.RebootAnnotation, "precondition: m1's request is on h1")
	// The operator powers h1 off for the request.
	time.Sleep(1100 * time.Millisecond)
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = false
		st.LastUpdated = &metav1.Time{Time: time.Now()}
	})

	// m1 is deleted (scaled down, or replaced); its request is removed.
	require.NoError(t, cl.Delete(ctx, "m1"))
	for i := 0; i < 3; i++ {
		_, err := rem.Reconcile(ctx, "m1")
		t.Logf("m1 gone: %v", err)
	}
	// CAPM3 releases h1: no consumer, spec.online false; the operator
	// deprovisions it and keeps it off in "available".
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	h.Spec.Online = false
	h.Spec.ConsumerRef = nil
	h.Spec.Image = nil
	require.NoError(t, c.Update(ctx, &h))
	time.Sleep(1100 * time.Millisecond)
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = false
		st.Provisioning.State = metal3.StateAvailable
		st.LastUpdated = &metav1.Time{Time: time.Now()}
	})

	// Well past StaleReads (1 s) and any operator lag: the host stays
	// off because its owner keeps it so.
	deadline := time.Now().Add(5 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		_, lastErr = rem.Reconcile(ctx, "m1")
		if a, _ := cl.GetAdmissions(ctx); !a.Has("m1") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	require.NotContains(t, h.Annotations, remediation.RebootAnnotation, "precondition: no reboot request on h1")
	require.False(t, h.Spec.Online, "precondition: h1's owner keeps it off")
	cl.SetNodeReady("m2", false)
	cl.SetNeedsRemediation("m2", true)
	_, err = rem.Reconcile(ctx, "m2")
	t.Logf("m2's pass: %v", err)
	adm, _ := cl.GetAdmissions(ctx)
	if adm.Has("m1") || !adm.Has("m2") {
		t.Fatalf("gone m1's admission is kept (admissions %v, last release attempt: %v) although h1 carries no request and is off only because its owner released it (spec.online %v, provisioning %q, no consumer): held for good; with MaxCount(1), m2 (unhealthy) is never remediated",
			adm.Machines, lastErr, h.Spec.Online, h.Status.Provisioning.State)
	}
}
