package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// TestReview39h_TwoWriteRedirectFakesRemediationFence (issue 39 round 8,
// point 2: "the controller never sends credentials to, nor takes evidence
// from, a BMC address that changed since the request unless an identity
// with more than the reboot-client role made the change"; doc.go
// Guarantees: "A client that may ask for reboots cannot write the
// fencing evidence"). TestReview39d_PinDroppedByClientRedirectFakesFence
// with the reboot client's one write split in two: it removes the
// remediation's request, waits for the pass that ends the reboot and
// drops the pin (it may read the record), and only then points spec.bmc
// at its endpoint: no reboot is pending, so nothing is pinned and nothing
// marked. The remediation asks again for the same attempt (its request
// was made before the BMC changed), that request pins the client's BMC,
// and the client's "Off" is taken as fencing evidence: FencedFor true
// while the real host ran the whole time (the Node of a running host
// would be deleted). No admission policy, the case the pin exists for.
// Ground truth: hw1's hardware log.
func TestReview39h_TwoWriteRedirectFakesRemediationFence(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	w := startPinWorld39(t, ctx, pinOpts39{stale: 300 * time.Millisecond})
	ns, hw1, hw2, srv2 := w.ns, w.hw1, w.hw2, w.srv2

	key := remediationKey39
	bmh, t1 := w.remediationAsks(t, ctx)

	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 10*time.Millisecond, "premise: the host is held off")
	rc := rebootClient(t, ns, "mallory")
	// Write 1: the request goes.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { delete(h.Annotations, key) }))
	// The client reads the record (its role may) until the pin is gone.
	require.Eventually(t, func() bool {
		var r v1alpha1.RebootRecord
		return rc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r) == nil && r.Spec.BMC == nil
	}, 10*time.Second, 10*time.Millisecond, "premise: the released reboot ends (the host is powered on) and its pin goes")
	// Write 2: spec.bmc points at the client's endpoint.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	// The remediation sees its request missing and asks again for the same attempt.
	time.Sleep(500 * time.Millisecond)
	tk := w.remediationAsksAgain(t, ctx, bmh)
	t2 := tk.At
	w.watchFakeFence(ctx, tk, func(r v1alpha1.RebootRecord) {
		t.Fatalf("the remediation's attempt (first asked at %s, before the BMC changed) got fencing evidence for its request of %s "+
			"from the BMC a reboot client put in (pin %+v): FencedFor true while the real host has run since before that request "+
			"(hw1 off during [t2, now]: %v); hw2 calls %d", t1.Format("15:04:05.000"), t2.Format("15:04:05.000"), r.Spec.BMC,
			hw1.WasOffDuring(t2, time.Now()), len(hw2.Calls()))
	})
}
