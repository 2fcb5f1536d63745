package kube

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview39d_PinDroppedByClientRedirectFakesFence (issue 39, point 2:
// "the controller never sends credentials to, nor takes evidence from, a
// BMC address that changed since the request unless an identity with more
// than the reboot-client role made the change"). No admission policy is
// in force (the case the pin exists for). A remediation asks for a hard
// power-off of h1; the host's real BMC is busy, so the host keeps
// running, and the controller pins that BMC. A reboot client (the shipped
// reboot-client role) then, in ONE update, removes the remediation's
// request and points spec.bmc at its own endpoint. Since ff2c158 checkPin
// lets any BMC through when the host carries no request, so the pass that
// sees the request gone logs in to the client's endpoint (credentials
// sent) and drops the pin; the remediation, seeing its request missing,
// requests again (remediation/phased.go "reboot request missing or
// replaced: request again", same attempt), and that request pins the
// client's BMC. The client's endpoint then says Off and the controller
// records it as fencing evidence: FencedFor the remediation's request is
// true while the real host (hw1's hardware log) ran the whole time, so
// the remediation would delete the Node of a running host.
// Ground truth: hw1.WasOnAt and the calls hw2 received.
func TestReview39d_PinDroppedByClientRedirectFakesFence(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	// hw1 is the real host; its BMC answers every power-off "busy"; hw2
	// is the reboot client's endpoint (it accepts the host's password).
	const stale = 300 * time.Millisecond
	w := startPinWorld39(t, ctx, pinOpts39{hw1: fake.NewPower(time.Now, fake.PowerConfig{Faults: busyOff39}), stale: stale})
	direct, ns, hw2, srv1, srv2, rec := w.direct, w.ns, w.hw2, w.srv1, w.srv2, w.rec

	key := remediationKey39
	bmh, _ := w.remediationAsks(t, ctx)
	w.offTried(t)

	// The reboot client: one update removing the request and redirecting the BMC.
	rc := rebootClient(t, ns, "mallory")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, key)
		h.Spec.BMC.Address = redfishAt(srv2)
	}), "premise: without config/admission the reboot-client role can do this")
	// The remediation sees its request missing and asks again (same attempt,
	// a new RequestedAt) a poll interval later; here once the controller
	// finished with the withdrawn request (it powered on what it took for
	// the host: the client's endpoint).
	// (On a controller that keeps the pin, this never happens: the wait
	// ends after 10 s and the remediation asks again anyway.)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var r v1alpha1.RebootRecord
		if direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r) == nil && (r.Spec.BMC == nil || r.Spec.BMC.Address == redfishAt(srv2)) &&
			len(hw2.Calls()) > 0 {
			break
		}
	}
	time.Sleep(time.Second)
	hw2Before := len(hw2.Calls())
	t.Logf("calls to the reboot client's endpoint before the remediation asks again: %d (credentials sent)", hw2Before)
	tk := w.remediationAsksAgain(t, ctx, bmh)
	t2 := tk.At

	w.watchFakeFence(ctx, tk, func(r v1alpha1.RebootRecord) {
		t.Fatalf("fencing evidence for the remediation's request came from the reboot client's BMC (pin %+v): "+
			"FencedFor true while the real host runs (hw1 on; hw2 calls %d); events %q", r.Spec.BMC, len(hw2.Calls()), drainEvents(rec))
	})
	var fin v1alpha1.RebootRecord
	_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &fin)
	t.Logf("record: pin %+v status %s; t2 %s; srv1 %s srv2 %s; events %q", fin.Spec.BMC, fin.Spec.Status, t2.UTC().Format(time.RFC3339Nano),
		srv1.URL, srv2.URL, drainEvents(rec))
	require.Empty(t, hw2.Calls(), "the host's credentials were sent to the BMC a reboot client put in while its reboot was pending")
}

// TestReview39d_UpgradeMarkerWedgesRequest: a controller of the previous
// version (eb8e24a~1) took a bare request of a host with
// spec.disablePowerOff, sent its reset and had it accepted: its record
// holds the pending state (Since, Request{value, owners, at}, Sending,
// Accepted, Op reset, Resets 1) and the host the marker
// (ResetRequestAnnotation = Since) written by patchHost as the field
// manager rebootkit-reset, but no token (that version wrote none). After
// the upgrade the new controller must answer that request (with at most
// one more reset: the first was carried out; the host reads On). Instead:
// reset.go discards the state (no token), writes a new Since to the
// record, and takeRequest's server-side apply (no force) of the marker
// with the new value conflicts with rebootkit-reset's ownership of it:
// 409, mapped to ErrConflict, requeued after 1 ms, for ever. The request is
// never answered, no event says why, and the record is rewritten dozens of
// times a second. The same wedge follows whenever anyone but the token
// owns the marker (a tool or, without config/admission, a reboot client
// that writes it). Ground truth: direct reads of host and record, fake
// power's Resets().
func TestReview39d_UpgradeMarkerWedgesRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, nil)
	since := time.Now().Add(-2 * time.Second).UTC()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.DisablePowerOff = true
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	var bmh metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	// The marker as the previous version wrote it (patchHost: a merge
	// patch as the field manager resetFieldOwner).
	require.NoError(t, direct.Patch(ctx, &bmh, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+ResetRequestAnnotation+`":"`+stamp(since)+`"}}}`)), client.FieldOwner(resetFieldOwner)))
	// The previous version's state, as it wrote it.
	old, err := json.Marshal(map[string]any{"since": since, "request": map[string]any{"value": "", "owners": []string{"kubectl-annotate"}, "at": since},
		"sending": since.Add(500 * time.Millisecond), "accepted": since.Add(600 * time.Millisecond), "op": "reset", "resets": 1})
	require.NoError(t, err)
	require.NoError(t, direct.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1",
		Annotations: map[string]string{ResetAnnotation: string(old)}},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: &v1alpha1.BMCPin{Address: bmh.Spec.BMC.Address,
			CredentialsName: bmh.Spec.BMC.CredentialsName, PendingSince: stamp(since)}}}))
	const stale = 500 * time.Millisecond
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	ok := assert.Eventually(t, func() bool {
		_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
		return !pending
	}, 20*time.Second, 20*time.Millisecond, "the request is answered")
	if !ok {
		var r v1alpha1.RebootRecord
		_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r)
		t.Logf("record %v; host %v; resets %v; events %q", r.Annotations, hostAnnotations(t, ctx, direct, ns), hw.Resets(), drainEvents(rec))
		rv0, _ := strconv.Atoi(r.ResourceVersion)
		time.Sleep(time.Second)
		_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r)
		rv1, _ := strconv.Atoi(r.ResourceVersion)
		t.Logf("the record's resourceVersion moved by %d in one second (the API server's global counter: writes meanwhile)", rv1-rv0)
		var h metal3.BareMetalHost
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
		t.Logf("the take, as the controller makes it: %v", takeRequest(ctx, &RebootHosts{Client: direct, Namespace: ns}, &h, stamp(time.Now())))
	}
	require.True(t, ok, "the pending request of the previous version is answered")
	// A fresh start after the upgrade may reset once (the state it does not
	// trust is one of unknown outcome); never more for one request.
	require.LessOrEqual(t, len(hw.Resets()), 1, "one request: at most one more reset; events %q", drainEvents(rec))
}

// TestReview39d_RebootClientForgedOwnershipWedgesRequest: under the
// shipped admission policy, which checks annotations, labels, finalizers,
// owners, spec and status but not metadata.managedFields, a reboot client
// rewrites a host's managedFields with an update that changes nothing
// else: the controller's token entry (rebootkit-reset-token, Apply) is
// renamed to its own Update entry. The request it took is then "not the
// one taken" (no token): its state is dropped, and the new take's apply
// of the marker conflicts with the client's forged ownership of it. The
// bare request is never answered, and the controller rewrites the record
// every millisecond for as long as the request stays. Correct: the
// request is answered (the forgery may at worst cost one more reset).
// Ground truth: direct reads, fake power's Resets().
func TestReview39d_RebootClientForgedOwnershipWedgesRequest(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw := fakeHost39(t, ctx, fake.PowerConfig{}, resetOnly39)
	installPolicy(t, direct, ns)
	rc := rebootClient(t, ns, "mallory")
	waitDenied(t, rc, ns, "h1")
	const stale = 3 * time.Second // the request stays pending for a while after its reset
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second})
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}), "a reboot client may ask for a reboot")
	require.Eventually(t, func() bool { return len(hw.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "premise: the request's reset")
	var h metal3.BareMetalHost
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h) == nil && tokenOn(&h)
	}, 5*time.Second, 20*time.Millisecond, "premise: the token is on the request")
	// The forgery: the token's entry becomes the client's own.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		for i, e := range h.ManagedFields {
			if e.Manager == resetTokenOwner {
				h.ManagedFields[i].Manager, h.ManagedFields[i].Operation = "mallory", metav1.ManagedFieldsOperationUpdate
			}
		}
	}), "premise: the admission policy lets a reboot client rewrite managedFields")
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
	require.False(t, tokenOn(&h), "premise: the token is gone")
	ok := assert.Eventually(t, func() bool {
		_, pending := hostAnnotations(t, ctx, direct, ns)[reboot.Annotation]
		return !pending
	}, 20*time.Second, 50*time.Millisecond, "the request is answered")
	if !ok {
		var r v1alpha1.RebootRecord
		_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r)
		t.Logf("record %v; host %v; resets %v; events %q", r.Annotations, hostAnnotations(t, ctx, direct, ns), hw.Resets(), drainEvents(rec))
	}
	require.True(t, ok)
	require.LessOrEqual(t, len(hw.Resets()), 2, "one request: at most one more reset")
}
