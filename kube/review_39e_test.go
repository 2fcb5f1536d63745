package kube

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview39e_RestoreThenRedirectFakesFence (issue 39 point 2, review
// round 5, against db47ef1's BMCChanged mark). No admission policy (the
// case the pin and the mark exist for). As in
// TestReview39d_PinDroppedByClientRedirectFakesFence, a remediation asks
// for a hard power-off of h1, the real BMC answers busy (the host keeps
// running) and the controller pins it; a reboot client removes the request
// and redirects spec.bmc in one update, and the record is marked
// BMCChanged (the round-4 fix works so far). The mark, however, is lifted
// by "restoring spec.bmc", which the same reboot client may do: it puts
// spec.bmc back, waits for a pass to clear the mark, and redirects
// spec.bmc again while that pass reads the real BMC (a slow one: 500 ms).
// The mark's clearing (bmcpin.go:103) leaves the pin nil while the
// record's status is still pending, the pass's record write conflicts,
// and the next pass finds neither mark nor pin: checkPin lets the new BMC
// through and nextPin (bmcpin.go:52) pins the client's endpoint for the
// old PendingSince. Then the
// remediation's request made again for the same attempt
// (remediation/phased.go "request again") pins the client's endpoint, and
// the client's "Off" becomes fencing evidence: FencedFor is true while the
// real host (hw1's hardware log) runs. doc.go: "a request made again (a
// remediation asks again for the same attempt) is never fenced by it", and
// the mark holds "until an administrator removes" it. Ground truth:
// hw1.WasOnAt, the record read directly.
func TestReview39e_RestoreThenRedirectFakesFence(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	var slow atomic.Bool // the real BMC answers a state read in 500 ms (many do in seconds)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOff {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		if c.Op == fake.OpState && slow.Load() {
			time.Sleep(500 * time.Millisecond)
		}
		return fake.Fault{}
	}})
	const stale = 300 * time.Millisecond
	w := startPinWorld39(t, ctx, pinOpts39{hw1: hw1, stale: stale})
	direct, ns, hw2, srv1, srv2, rec := w.direct, w.ns, w.hw2, w.srv1, w.srv2, w.rec

	record := func() (v1alpha1.RebootRecord, bool) {
		var r v1alpha1.RebootRecord
		err := direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r)
		return r, err == nil
	}
	key := remediationKey39
	bmh, _ := w.remediationAsks(t, ctx)
	w.offTried(t)

	rc := rebootClient(t, ns, "mallory")
	// 1. One update: the request removed, the BMC redirected: marked.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, key)
		h.Spec.BMC.Address = redfishAt(srv2)
	}))
	require.Eventually(t, func() bool {
		r, ok := record()
		return ok && r.Spec.BMCChanged != nil
	}, 10*time.Second, 20*time.Millisecond, "premise: the record is marked BMCChanged (the round-4 fix)")
	slow.Store(true)
	// 2. The same reboot client restores spec.bmc: a pass clears the mark
	// and reads the (slow) real BMC before it writes the record.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	require.Eventually(t, func() bool {
		r, ok := record()
		return ok && r.Spec.BMCChanged == nil
	}, 10*time.Second, 20*time.Millisecond, "premise: restoring spec.bmc lifts the mark")
	// 3. And redirects it again at once, while that pass is in its read;
	// no request is on the host now. The pass's write conflicts; the next
	// finds neither mark nor pin.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	time.Sleep(time.Second)

	// The remediation asks again for the same attempt.
	tk := w.remediationAsksAgain(t, ctx, bmh)
	w.watchFakeFence(ctx, tk, func(r v1alpha1.RebootRecord) {
		t.Fatalf("fencing evidence for the remediation's request made again came from the BMC a reboot client put in "+
			"(pin %+v, mark %+v): FencedFor true while the real host runs (hw1 on; hw2 calls %d); the client lifted the "+
			"BMCChanged mark itself by restoring spec.bmc for one pass; events %q", r.Spec.BMC, r.Spec.BMCChanged, len(hw2.Calls()), drainEvents(rec))
	})
	fin, _ := record()
	t.Logf("end: pin %+v mark %+v status %s; hw2 calls %d; hw1 on %v; srv1 %s srv2 %s; events %q", fin.Spec.BMC, fin.Spec.BMCChanged, fin.Spec.Status,
		len(hw2.Calls()), hw1.WasOnAt(time.Now()), srv1.URL, srv2.URL, drainEvents(rec))
}

// TestReview39e_PinnedReadHoldsWorker (issue 39 point 5, "no worker waits
// on a login; logins and calls run where they cannot hold the queue",
// against db47ef1's pinnedReadsOff). A host whose pending reboot's
// requests are gone and whose spec.bmc changed (an administrator replaced
// a dead BMC, no admission policy in force) gets, in checkPin, a State
// call to the pinned BMC: a login and a call made in the reconcile worker
// itself (Powers.Controller, called by Async.Controller before any
// goroutine), not in Async's background. The old BMC is the one that
// died (it accepts and never answers), so the worker waits the pool's
// whole login/call timeout (30 s each in the binary); 32 such hosts hold
// every worker, and a fence of a healthy host waits. Async's promise: a
// pass never waits on a BMC longer than Wait (250 ms).
func TestReview39e_PinnedReadHoldsWorker(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	// The pinned (old) BMC: accepts connections, never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	}()
	dead := "redfish+http://" + ln.Addr().String() + "/redfish/v1/Systems/1"
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	defer srv2.Close()
	newBMH(t, admin, ns, "h1")
	require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = dead }))
	var bmh metal3.BareMetalHost
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	pin := &v1alpha1.BMCPin{Address: dead, CredentialsName: bmh.Spec.BMC.CredentialsName, PendingSince: time.Now().UTC().Format(time.RFC3339Nano)}
	require.NoError(t, admin.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin}}))
	// The requests are gone; the BMC was replaced.
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	const bmcTimeout = 3 * time.Second
	p := &Powers{WithoutAdmissionPolicy: true, Client: admin, Secrets: admin, Namespace: ns, PolicyName: "not-installed-" + ns, PolicySettle: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: bmcTimeout, ConnectTimeout: bmcTimeout})}
	defer func() { _ = p.Close() }()
	a := &Async{Power: p.Controller}
	start := time.Now()
	_, err = a.Controller("h1")
	took := time.Since(start)
	t.Logf("Async.Controller: %v after %v", err, took)
	require.Less(t, took, time.Second, "the reconcile worker waited %v on the dead pinned BMC (checkPin's pinnedReadsOff runs "+
		"in the worker, outside Async): with the binary's 30 s timeouts, 32 such hosts hold every worker", took)
}

// TestReview39e_ForgedTokenDeputyRemovesProtectedFields (issue 39 point 2:
// "a reboot client can change nothing of a host but the reboot
// annotations"; doc.go: with config/admission installed a client "can
// change nothing of a host but the reboot annotations (not spec.bmc, not
// labels, not the detached annotation)"). Round 4 showed that the
// admission policy lets a reboot client rewrite managedFields. The
// controller acts on managedFields: a token entry (manager
// rebootkit-reset-token, Apply) on a host without spec.disablePowerOff
// sends it to dropReset, whose releaseRequest is a server-side apply of
// nothing as that manager, forced (72857d8), which removes every field
// that entry alone owns. A reboot client that forges such an entry owning
// a label, the detached annotation and spec.online (and strips the other managers'
// claims on them) has the controller, an identity the policy does not
// restrain, remove them for it. Ground truth: the host read directly.
func TestReview39e_ForgedTokenDeputyRemovesProtectedFields(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	newBMH(t, direct, ns, "h1") // label app=x
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "baremetalhost.metal3.io/detached", "")
	}))
	installPolicy(t, direct, ns)
	rc := rebootClient(t, ns, "mallory")
	waitDenied(t, rc, ns, "h1")
	require.Error(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { delete(h.Labels, "app") }),
		"premise: the policy denies a reboot client removing a label")
	require.Error(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { delete(h.Annotations, "baremetalhost.metal3.io/detached") }),
		"premise: the policy denies a reboot client removing the detached annotation")
	rec, _ := review39bEnv(t, "reboot-"+ns, ns, hw, reboot.Config{StaleReads: 3 * time.Second, RetryDelay: 3 * time.Second, SoftTimeout: time.Second})
	time.Sleep(500 * time.Millisecond)

	// The forgery, allowed by the policy: a bare request, then an update
	// that changes managedFields only.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}), "premise: a reboot client may ask for a reboot")
	forged := `{"f:metadata":{"f:annotations":{"f:baremetalhost.metal3.io/detached":{},"f:reboot.metal3.io":{}},"f:labels":{"f:app":{}}},"f:spec":{"f:online":{}}}`
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		h.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: resetTokenOwner, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: metal3.GroupVersion.String(), Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(forged)}}
	}), "premise: a reboot client may rewrite managedFields and ask for a reboot")
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
	for _, e := range h.ManagedFields {
		t.Logf("after the forgery: %s %s %s", e.Manager, e.Operation, e.FieldsV1.GetRawString())
	}
	require.True(t, tokenOn(&h), "premise: the forged token is on")
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &h))
		_, detached := h.Annotations["baremetalhost.metal3.io/detached"]
		if h.Labels["app"] != "x" || !detached || !h.Spec.Online {
			var mf []string
			for _, e := range h.ManagedFields {
				mf = append(mf, e.Manager+"/"+string(e.Operation))
			}
			t.Fatalf("the controller removed, for a reboot client, what the admission policy forbids it to change: labels %v, "+
				"annotations %v, spec.online %v (managers %v); events %q", h.Labels, h.Annotations, h.Spec.Online, mf, drainEvents(rec))
		}
	}
}
