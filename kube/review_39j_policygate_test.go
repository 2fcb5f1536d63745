package kube

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestAdmissionPolicyAbsentNothingSent (issue 39 point 2, the lead's
// design: the controller relies on the admission policy of
// config/admission unless run with --without-admission-policy). Without
// the flag and without the policy, a reboot request of a managed host
// gets no call at all to its BMC (no login, no power call: the BMC
// emulator's own login log and the hardware's call log) and an event
// that says why and names the fix; once the policy and its denying
// binding are installed, the same request is carried out (the host is
// power-cycled), so the refusal is the policy's absence and nothing
// else. On the old code the request was carried out at once.
func TestAdmissionPolicyAbsentNothingSent(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := redfishtest.NewBMC(time.Now, hw, "admin", "pw-1")
	srv := httptest.NewServer(bmc)
	defer srv.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv) }))
	mgr := namespacedManager(t, ns)
	const stale = 300 * time.Millisecond
	// The policy is renamed per namespace (installPolicy), which the
	// generated role does not name: it is read as an administrator, the
	// rest under the controller's role.
	powers := &Powers{Client: mgr.GetClient(), Secrets: policyAsAdmin{Reader: mgr.GetAPIReader(), admin: direct}, Namespace: ns, Timeout: 5 * time.Second,
		PolicyName: AdmissionPolicyName + "-" + ns, PolicySettle: time.Second, PolicyRecheck: 500 * time.Millisecond, StaleReads: stale,
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

	asked := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	var seen []string
	require.Eventually(t, func() bool {
		seen = append(seen, drainEvents(rec)...)
		for _, e := range seen {
			if strings.Contains(e, "admission policy is not in force") && strings.Contains(e, "config/admission") &&
				strings.Contains(e, "--without-admission-policy") {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "an event says why the host is not acted on and names the fix; events %q", seen)
	time.Sleep(2 * time.Second) // passes go on, each refused
	require.Empty(t, bmc.LoginLog(), "no credentials sent to the BMC without the admission policy")
	require.Empty(t, hw.Calls(), "no call reached the hardware without the admission policy")
	require.True(t, hw.WasOnAt(time.Now()) && !hw.WasOffDuring(asked, time.Now()), "the host was never powered off")

	// The policy installed: the same request is carried out.
	installPolicy(t, direct, ns)
	require.Eventually(t, func() bool { return hw.WasOffDuring(asked, time.Now()) && hw.WasOnAt(time.Now()) }, 20*time.Second,
		50*time.Millisecond, "with the policy in force the reboot is carried out; events %q", drainEvents(rec))
}

// policyAsAdmin reads admission policies and bindings through admin,
// everything else through Reader.
type policyAsAdmin struct {
	client.Reader
	admin client.Reader
}

func (r policyAsAdmin) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
		return r.admin.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
