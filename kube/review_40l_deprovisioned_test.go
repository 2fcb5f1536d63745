package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"

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
	ctx := context.Background()
	w := newOperatorWorld(t, 2, time.Second, func(st *metal3.BareMetalHostStatus) { st.Provisioning.State = metal3.StateProvisioned })
	c, cl, rem := w.c, w.cl, w.rem

	w.unhealthy("m1")
	h, _ := w.firstRequest(ctx)
	// The operator powers h1 off for the request.
	w.statusLater("h1", false, nil)

	// m1 is deleted (scaled down, or replaced); its request is removed.
	w.deleteMachine(ctx, "m1", 3)
	// CAPM3 releases h1: no consumer, spec.online false; the operator
	// deprovisions it and keeps it off in "available".
	w.get(ctx, "h1", &h)
	h.Spec.Online = false
	h.Spec.ConsumerRef = nil
	h.Spec.Image = nil
	require.NoError(t, c.Update(ctx, &h))
	w.statusLater("h1", false, func(st *metal3.BareMetalHostStatus) { st.Provisioning.State = metal3.StateAvailable })

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
	w.get(ctx, "h1", &h)
	require.NotContains(t, h.Annotations, remediation.RebootAnnotation, "precondition: no reboot request on h1")
	require.False(t, h.Spec.Online, "precondition: h1's owner keeps it off")
	adm := w.secondUnhealthy(ctx)
	if adm.Has("m1") || !adm.Has("m2") {
		t.Fatalf("gone m1's admission is kept (admissions %v, last release attempt: %v) although h1 carries no request and is off only because its owner released it (spec.online %v, provisioning %q, no consumer): held for good; with MaxCount(1), m2 (unhealthy) is never remediated",
			adm.Machines, lastErr, h.Spec.Online, h.Status.Provisioning.State)
	}
}
