package kube

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rebootkit/rebootkit/power"
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
			bmc, atBMC := trap(t)
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
			require.NoError(t, PolicyInForce(ctx, admin, name, time.Now(), 0), "the controller's check finds the policy in force")

			r := &reboot.Reconciler{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Now: time.Now, Power: p.Controller}
			cl := &reboot.Client{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Key: "fencer", Now: time.Now}
			_, err := cl.Request(ctx, "h1", power.ModeHard)
			require.NoError(t, err)
			_, _ = r.Reconcile(ctx, "h1") // the pass that sees the request, pinning the BMC
			require.Positive(t, atBMC.Load(), "the host's own BMC was asked (the gate let the pass through)")

			// A holder of exactly the shipped reboot-client role
			// rewrites the address: the API server accepts it.
			rc := rebootClient(t, ns, "rc")
			require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(evil) }),
				"ground truth: the policy does not protect this host")
			_, err = r.Reconcile(ctx, "h1")
			assert.ErrorIs(t, err, ErrBMCChanged, "a BMC a reboot client could change is not trusted")
			assert.Zero(t, atEvil.Load(), "no request (a login carries the host's password) reached the reboot client's endpoint")
		})
	}
}
