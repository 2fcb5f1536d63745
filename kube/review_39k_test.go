package kube

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// installPolicy39k creates the policy and binding of config/admission
// under a name of ns's own, after editing them with editP and editB, and
// returns the name.
func installPolicy39k(t *testing.T, admin client.Client, ns string, editP func(*admissionv1.ValidatingAdmissionPolicy),
	editB func(*admissionv1.ValidatingAdmissionPolicyBinding)) string {
	t.Helper()
	raw, err := os.ReadFile("config/admission/reboot_client_policy.yaml")
	require.NoError(t, err)
	name := AdmissionPolicyName + "-" + ns
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &p))
			p.Name = name
			editP(&p)
			require.NoError(t, admin.Create(context.Background(), &p))
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &b))
			b.Name, b.Spec.PolicyName = name, name
			editB(&b)
			require.NoError(t, admin.Create(context.Background(), &b))
		}
	}
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = admin.Delete(context.Background(), &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// TestReview39k_PolicyGateTrustsPolicyThatDoesNotProtect: the controller
// (no --without-admission-policy) trusts a BMC changed during a pending
// reboot when the policy and a denying binding of its name "have been in
// force since before the reboot became pending" (kube doc), and
// PolicyInForce checks only names, policyName and Deny. A binding of that
// name that covers another namespace (the shape the tests' own
// installPolicy uses), or a policy whose validations were edited, passes
// that check while the API server lets a holder of exactly the shipped
// reboot-client role rewrite spec.bmc.address (ground truth: its write is
// accepted). The controller then logs in to the client's endpoint with the
// host's credentials. Correct: no request reaches the client's endpoint
// (ErrBMCChanged), as when no policy is installed.
func TestReview39k_PolicyGateTrustsPolicyThatDoesNotProtect(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	other := newNamespace(t, admin)
	for what, edit := range map[string]struct {
		p func(*admissionv1.ValidatingAdmissionPolicy)
		b func(*admissionv1.ValidatingAdmissionPolicyBinding)
	}{
		"binding covers another namespace": {
			p: func(*admissionv1.ValidatingAdmissionPolicy) {},
			b: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: other}}}
			},
		},
		"policy validations edited": {
			p: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.Validations = []admissionv1.Validation{{Expression: "true"}}
			},
			b: func(*admissionv1.ValidatingAdmissionPolicyBinding) {},
		},
	} {
		t.Run(what, func(t *testing.T) {
			ns := newNamespace(t, admin)
			bmc, _ := trap(t)
			evil, atEvil := trap(t)
			newBMH(t, admin, ns, "h1")
			require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
				Data: map[string][]byte{"username": []byte("admin"), "password": []byte("h1-pw")}}))
			require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(bmc) }))
			name := installPolicy39k(t, admin, ns, edit.p, edit.b)
			time.Sleep(1100 * time.Millisecond) // PolicySettle
			p := &Powers{Client: admin, Secrets: admin, Namespace: ns, Timeout: 5 * time.Second, PolicySettle: time.Second,
				PolicyName: name, PolicyRecheck: 100 * time.Millisecond,
				Pool: power.NewPool(power.PoolConfig{CallTimeout: time.Second, ConnectTimeout: time.Second})}
			t.Cleanup(func() { _ = p.Close() })
			// Round 10 found the controller's check passing here; it
			// must not: the policy does not protect the host.
			assert.ErrorIs(t, PolicyInForce(ctx, admin, name, time.Now(), 0), ErrNoAdmissionPolicy,
				"the controller's check does not take this policy for config/admission's")

			r := &reboot.Reconciler{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Now: time.Now, Power: p.Controller}
			cl := &reboot.Client{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Key: "fencer", Now: time.Now}
			_, err := cl.Request(ctx, "h1", power.ModeHard)
			require.NoError(t, err)
			_, _ = r.Reconcile(ctx, "h1") // the pass that sees the request (refused by the gate since the fix)

			// A holder of exactly the shipped reboot-client role
			// rewrites the address: the API server accepts it.
			rc := rebootClient(t, ns, "rc")
			require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(evil) }),
				"ground truth: the policy does not protect this host")
			_, err = r.Reconcile(ctx, "h1")
			assert.True(t, errors.Is(err, ErrBMCChanged) || errors.Is(err, ErrNoAdmissionPolicy),
				"a BMC a reboot client could change is not trusted (the policy is not in force, or the change is refused): %v", err)
			assert.Zero(t, atEvil.Load(), "no request (a login carries the host's password) reached the reboot client's endpoint")
		})
	}
}

// withdrawnOffSetup39k is TestBMCReplacedAfterHoldWithdrawnNormalPath's
// set-up (--without-admission-policy, a keyed hold powers h1 off through
// its first BMC, whose hardware it returns, and pins it), with a
// controller running; it returns the direct client, the namespace, the
// first and second hardware and the recorder.
func withdrawnOffSetup39k(t *testing.T, ctx context.Context, cfg1 fake.PowerConfig) (client.Client, string, *fake.Power, *fake.Power, *httptest.Server, *events.FakeRecorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw1 := fake.NewPower(time.Now, cfg1)
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	t.Cleanup(srv1.Close)
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	t.Cleanup(srv2.Close)
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	const stale = 500 * time.Millisecond
	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = powers.Close() })

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.AnnotationPrefix+"fencer", `{"mode":"hard"}`)
	}))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 20*time.Millisecond, "held off")
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC != nil
	}, 5*time.Second, 20*time.Millisecond, "premise: the hold pins the BMC")
	return direct, ns, hw1, hw2, srv2, rec
}

// TestReview39k_PinnedPowerOnIgnoresOnlineFalse: with
// --without-admission-policy, an administrator takes a held-off host out
// of service: in one write she sets spec.online false, withdraws the hold
// and puts the replacement BMC in spec.bmc. The reboot package keeps a
// host with Online false off ("off; held while Online is false"), but
// checkPin's Off exception (powerOnPinned) powers it on through the
// pinned BMC whatever spec.online says. Ground truth: the first BMC's
// hardware, which must stay off.
func TestReview39k_PinnedPowerOnIgnoresOnlineFalse(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw1, hw2, srv2, rec := withdrawnOffSetup39k(t, ctx, fake.PowerConfig{})
	wrote := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.Online = false
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	hw2.OutOfBandOff()
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMCChanged != nil
	}, 10*time.Second, 50*time.Millisecond, "premise: the pin is dropped and the record marked; events %q", drainEvents(rec))
	time.Sleep(3 * time.Second)
	assert.False(t, hw1.WasOnAt(time.Now()), "spec.online is false: the host stays off; events %q", drainEvents(rec))
	for _, c := range hw1.Calls() {
		if c.At.After(wrote) {
			assert.NotEqual(t, fake.OpOn, c.Op, "no power-on of a host whose spec.online is false (call %+v)", c)
		}
	}
}

// TestReview39k_PinnedPowerOnOneShot: the Off exception's power-on
// through the pinned BMC (powerOnPinned) is one background call whose
// result nobody reads, and the record is marked BMCChanged in the same
// pass, so no later pass tries again. With the pinned BMC failing its
// power-on calls for the first 3 s after the administrator's write (a
// BMC busy for a moment, then healthy for good), the host stays off
// until an administrator accepts the new BMC, although the doc says it
// "is powered back on through that pinned BMC". Ground truth: the first
// BMC's hardware, which must be on within 20 s with its BMC healthy.
func TestReview39k_PinnedPowerOnOneShot(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	var until atomic.Int64
	until.Store(time.Now().Add(time.Hour).UnixNano())
	cfg := fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && c.At.UnixNano() < until.Load() {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}}
	direct, ns, hw1, hw2, srv2, rec := withdrawnOffSetup39k(t, ctx, cfg)
	until.Store(time.Now().Add(3 * time.Second).UnixNano())
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	hw2.OutOfBandOff()
	on := assert.Eventually(t, func() bool { return hw1.WasOnAt(time.Now()) }, 20*time.Second, 100*time.Millisecond,
		"the pinned BMC is healthy again after 3 s: the host is powered back on through it")
	if !on {
		t.Logf("calls of the pinned BMC: %+v; events %q", hw1.Calls(), drainEvents(rec))
	}
	assert.Empty(t, hw2.Calls(), "no call to the new BMC before it is accepted")
}

// TestReview39k_BindingSwitchedToDenyTrustsEarlierRedirect: PolicyInForce
// dates the policy's force by creationTimestamp, but a binding is edited
// in place: rolled out with validationActions [Warn] (the rollout the
// Kubernetes docs advise) and switched to [Deny] later, it did not
// protect the host in between. A controller run with
// --without-admission-policy during that rollout pins a host's BMC; a
// holder of exactly the shipped reboot-client role rewrites
// spec.bmc.address while the binding only warns (ground truth: the API
// server accepts the write); the administrator then switches the binding
// to Deny. The next pass finds the policy "in force since before the
// reboot became pending" and logs in to the client's endpoint with the
// host's credentials. Correct: no request reaches it (ErrBMCChanged).
func TestReview39k_BindingSwitchedToDenyTrustsEarlierRedirect(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	bmc, atBMC := trap(t)
	evil, atEvil := trap(t)
	newBMH(t, admin, ns, "h1")
	require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("h1-pw")}}))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(bmc) }))
	name := installPolicy39k(t, admin, ns, func(*admissionv1.ValidatingAdmissionPolicy) {}, func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
		b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
	})
	time.Sleep(1100 * time.Millisecond) // PolicySettle
	p := &Powers{WithoutAdmissionPolicy: true, Client: admin, Secrets: admin, Namespace: ns, Timeout: 5 * time.Second, PolicySettle: time.Second,
		PolicyName: name, Pool: power.NewPool(power.PoolConfig{CallTimeout: time.Second, ConnectTimeout: time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	r := &reboot.Reconciler{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Now: time.Now, Power: p.Controller}
	cl := &reboot.Client{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Key: "fencer", Now: time.Now}
	_, err := cl.Request(ctx, "h1", power.ModeHard)
	require.NoError(t, err)
	_, _ = r.Reconcile(ctx, "h1") // pins the BMC
	_, _ = r.Reconcile(ctx, "h1")
	var rec v1alpha1.RebootRecord
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &rec))
	require.NotNil(t, rec.Spec.BMC, "premise: the record pins the BMC of the pending reboot")
	require.Positive(t, atBMC.Load())

	rc := rebootClient(t, ns, "rc")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(evil) }),
		"ground truth: a binding that only warns lets the reboot client redirect the BMC")
	_, err = r.Reconcile(ctx, "h1")
	require.ErrorIs(t, err, ErrBMCChanged, "premise: while the binding only warns, the redirect is refused")
	require.Zero(t, atEvil.Load())

	// The rollout ends: the binding now denies.
	var b admissionv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: name}, &b))
	b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Deny}
	require.NoError(t, admin.Update(ctx, &b))
	_, err = r.Reconcile(ctx, "h1")
	assert.ErrorIs(t, err, ErrBMCChanged, "the BMC was changed while the binding did not deny: not trusted")
	assert.Zero(t, atEvil.Load(), "no request (a login carries the host's password) reached the reboot client's endpoint")
}

// TestReview39k_PinnedPowerOnIgnoresOnlineFalseTwoWrites is
// TestReview39k_PinnedPowerOnIgnoresOnlineFalse in the administrator's
// ordinary order: she first takes the held host out of service
// (spec.online false, the hold withdrawn: the reboot package keeps it
// off), and only then replaces its BMC in spec.bmc. The host must stay
// off; the Off exception powers it on through the pinned BMC.
func TestReview39k_PinnedPowerOnIgnoresOnlineFalseTwoWrites(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	direct, ns, hw1, hw2, srv2, rec := withdrawnOffSetup39k(t, ctx, fake.PowerConfig{})
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.Online = false
		delete(h.Annotations, reboot.AnnotationPrefix+"fencer")
	}))
	time.Sleep(2 * time.Second)
	require.False(t, hw1.WasOnAt(time.Now()), "premise: out of service, the host is kept off")
	wrote := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv2) }))
	hw2.OutOfBandOff()
	time.Sleep(4 * time.Second)
	assert.False(t, hw1.WasOnAt(time.Now()), "spec.online is false: the host stays off; events %q", drainEvents(rec))
	for _, c := range hw1.Calls() {
		if c.At.After(wrote) {
			assert.NotEqual(t, fake.OpOn, c.Op, "no power-on of a host whose spec.online is false (call %+v)", c)
		}
	}
}
