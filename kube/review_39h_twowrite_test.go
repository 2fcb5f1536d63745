package kube

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	defer srv2.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	const stale = 300 * time.Millisecond
	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	defer powers.Close()
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	key := reboot.AnnotationPrefix + remediation.RebootKey
	var bmh metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	t1 := time.Now()
	v1 := remediation.RebootValue(string(bmh.UID)+"-machine", t1)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, key, v1) }))
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC != nil &&
			record.Spec.BMC.Address == redfishAt(srv1)
	}, 10*time.Second, 20*time.Millisecond, "premise: the remediation's request pins the real BMC")

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
	t2 := time.Now()
	v2 := remediation.RebootValue(string(bmh.UID)+"-machine", t2)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, key, v2) }))
	tk := reboot.Ticket{Host: "h1", Annotation: key, Value: v2, At: t2}
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		var r v1alpha1.RebootRecord
		if direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r) == nil && r.Spec.Status != "" {
			var st reboot.Status
			if json.Unmarshal([]byte(r.Spec.Status), &st) == nil && reboot.FencedFor(st, tk, time.Now()) && hw1.WasOnAt(time.Now()) {
				t.Fatalf("the remediation's attempt (first asked at %s, before the BMC changed) got fencing evidence for its request of %s "+
					"from the BMC a reboot client put in (pin %+v): FencedFor true while the real host has run since before that request "+
					"(hw1 off during [t2, now]: %v); hw2 calls %d", t1.Format("15:04:05.000"), t2.Format("15:04:05.000"), r.Spec.BMC,
					hw1.WasOffDuring(t2, time.Now()), len(hw2.Calls()))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
