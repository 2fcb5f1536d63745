package kube

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// review39iEnv starts a reboot controller (no admission policy) in a
// fresh namespace for host h1 behind srv1, and returns the direct client,
// the namespace and the event recorder.
func review39iEnv(t *testing.T, ctx context.Context, srv1 *httptest.Server, stale time.Duration) (client.Client, string, *events.FakeRecorder, func()) {
	t.Helper()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(mctx) }()
	return direct, ns, rec, func() { cancel(); wg.Wait(); powers.Close() }
}

// review39iWatchFence fails t if, within d, the record's status gives
// FencedFor tk while hw1 (the real hardware) runs.
func review39iWatchFence(t *testing.T, ctx context.Context, direct client.Client, ns string, tk reboot.Ticket, hw1, hw2 *fake.Power, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var r v1alpha1.RebootRecord
		if direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r) == nil && r.Spec.Status != "" {
			var st reboot.Status
			if json.Unmarshal([]byte(r.Spec.Status), &st) == nil && reboot.FencedFor(st, tk, time.Now()) && hw1.WasOnAt(time.Now()) {
				t.Fatalf("%s: FencedFor true for the request of %s while the real host runs (hw1 off during [request, now]: %v); "+
					"pin %+v, lastBMC %+v; calls to the client's endpoint %d", what, tk.At.Format("15:04:05.000"),
					hw1.WasOffDuring(tk.At, time.Now()), r.Spec.BMC, r.Spec.LastBMC, len(hw2.Calls()))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReview39i_NeverRebootedHostRedirectFakesFence (issue 39 point 2;
// doc.go Guarantees: "A client that may ask for reboots cannot write the
// fencing evidence"). A host rebootkit has managed (and read through its
// real BMC at every idle pass) but never rebooted has no RebootRecord,
// so no LastBMC: a reboot client (the shipped role, no admission policy)
// points spec.bmc at its endpoint, and the next request (a remediation's)
// pins that endpoint, sends it the host's password and takes its "Off" as
// fencing evidence: FencedFor true while the real host runs (its Node
// would be deleted). The controller knew the real BMC (it read it) and
// recorded nothing. Ground truth: hw1's own power history, the client
// endpoint's login log.
func TestReview39i_NeverRebootedHostRedirectFakesFence(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	evil := redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1")
	srv2 := httptest.NewServer(evil)
	defer srv2.Close()
	direct, ns, rec, stop := review39iEnv(t, ctx, srv1, 300*time.Millisecond)
	defer stop()
	// The host is managed and idle for a while.
	time.Sleep(2 * time.Second)
	t.Logf("idle: calls to the real BMC %d", len(hw1.Calls()))
	rc := rebootClient(t, ns, "mallory")
	redirected := time.Now()
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	time.Sleep(500 * time.Millisecond)
	var bmh metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	key := reboot.AnnotationPrefix + remediation.RebootKey
	t2 := time.Now()
	v := remediation.RebootValue(string(bmh.UID)+"-machine", t2)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, key, v) }))
	tk := reboot.Ticket{Host: "h1", Annotation: key, Value: v, At: t2}
	defer func() {
		n := 0
		for _, l := range evil.LoginLog() {
			if l.Credentials == redfishtest.Fingerprint("admin", "pw-1") && !l.At.Before(redirected) {
				n++
			}
		}
		t.Logf("logins with the host's password at the client's endpoint: %d; events %q", n, drainEvents(rec))
	}()
	review39iWatchFence(t, ctx, direct, ns, tk, hw1, hw2, 6*time.Second,
		"a reboot client redirected spec.bmc of a never-rebooted host before the first request")
}

// TestReview39i_OffExceptionMakesClientBMCLastThenFakesFence (issue 39
// point 2; doc.go: "one exception: a host whose pinned BMC reads Off after
// its requests were removed is powered back on through the new one, which
// is then its LastBMC"). A reboot client asks for a keyed reboot (held
// off through the real BMC: it reads Off) and then, in one write, removes
// its request and points spec.bmc at its endpoint. The exception powers
// "the host" on through the client's endpoint (the real host stays off),
// and that endpoint becomes the host's LastBMC without anyone accepting
// it, and with nothing recorded for an administrator to see. The
// administrator powers the real host on at its console; the next
// remediation request pins the client's endpoint, and its "Off" is taken
// as fencing evidence: FencedFor true while the real host runs. Ground
// truth: hw1's own power history.
func TestReview39i_OffExceptionMakesClientBMCLastThenFakesFence(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	defer srv2.Close()
	const stale = 300 * time.Millisecond
	direct, ns, rec, stop := review39iEnv(t, ctx, srv1, stale)
	defer stop()
	rc := rebootClient(t, ns, "mallory")
	ckey := reboot.AnnotationPrefix + "mallory"
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, ckey, "")
	}))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 10*time.Millisecond, "premise: the host is held off")
	time.Sleep(time.Second)
	// One write: the request goes, spec.bmc points at the client's endpoint.
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, ckey)
		h.Spec.BMC.Address = redfishAt(srv2)
	}))
	var record v1alpha1.RebootRecord
	ok := assertEventually(func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC == nil &&
			record.Spec.LastBMC != nil && record.Spec.LastBMC.Address == redfishAt(srv2)
	}, 10*time.Second)
	t.Logf("after the one write: pin %+v lastBMC %+v mark %+v; hw1 on %v; hw2 calls %d", record.Spec.BMC, record.Spec.LastBMC,
		record.Spec.BMCChanged, hw1.WasOnAt(time.Now()), len(hw2.Calls()))
	// The bug: the exception made the client's endpoint LastBMC with no
	// acceptance. Whatever happened, the fence below must not be faked.
	assert.False(t, ok, "the client's endpoint became the host's LastBMC with no one accepting it: %+v", record.Spec.LastBMC)
	// The administrator powers the real host on at its console.
	hw1.OutOfBandOn()
	time.Sleep(time.Second)
	var bmh metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &bmh))
	key := reboot.AnnotationPrefix + remediation.RebootKey
	t2 := time.Now()
	v := remediation.RebootValue(string(bmh.UID)+"-machine", t2)
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, key, v) }))
	tk := reboot.Ticket{Host: "h1", Annotation: key, Value: v, At: t2}
	defer func() { t.Logf("events %q", drainEvents(rec)) }()
	review39iWatchFence(t, ctx, direct, ns, tk, hw1, hw2, 6*time.Second,
		"the client's endpoint, made LastBMC by the Off exception with no acceptance")
}

func assertEventually(f func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f()
}

// TestReview39i_OwnHoldThenRedirectSendsCredentials (issue 39 point 2:
// "the controller never sends credentials to ... a BMC address that
// changed since the request unless an identity with more than the
// reboot-client role made the change"; doc.go Guarantees). The Off
// exception is the reboot client's to trigger: it asks for a keyed
// reboot of its own (the shipped role may), which holds the host off
// through its real BMC, and then, in one write, removes its request and
// points spec.bmc at its endpoint. The pinned BMC reads Off (because of
// the client's own hold), and the controller logs in to the client's
// endpoint with the host's password to "power the host back on": two
// writes of the reboot-client role are enough to get any host's BMC
// password, and the real host is left off. Ground truth: the client
// endpoint's own login log, hw1's power history.
func TestReview39i_OwnHoldThenRedirectSendsCredentials(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	evil := redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1")
	srv2 := httptest.NewServer(evil)
	defer srv2.Close()
	direct, ns, rec, stop := review39iEnv(t, ctx, srv1, 300*time.Millisecond)
	defer stop()
	rc := rebootClient(t, ns, "mallory")
	ckey := reboot.AnnotationPrefix + "mallory"
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, ckey, "") }))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 10*time.Millisecond, "premise: the host is held off")
	time.Sleep(time.Second)
	redirected := time.Now()
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, ckey)
		h.Spec.BMC.Address = redfishAt(srv2)
	}))
	time.Sleep(5 * time.Second)
	var leaked []time.Time
	for _, l := range evil.LoginLog() {
		if l.Credentials == redfishtest.Fingerprint("admin", "pw-1") && l.At.After(redirected) {
			leaked = append(leaked, l.At)
		}
	}
	var record v1alpha1.RebootRecord
	_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record)
	require.Empty(t, leaked, "a reboot client held the host off with its own request, then removed it and redirected spec.bmc in one "+
		"write: the host's password went to the client's endpoint at %v (real host on now: %v; lastBMC %+v, mark %+v); events %q",
		leaked, hw1.WasOnAt(time.Now()), record.Spec.LastBMC, record.Spec.BMCChanged, drainEvents(rec))
}
