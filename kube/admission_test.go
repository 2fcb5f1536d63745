package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// installPolicy creates the admission policy and binding of
// config/admission, renamed for namespace ns and bound to it only (the
// API server is shared by the tests), and returns their name.
func installPolicy(t *testing.T, admin client.Client, ns string) string {
	t.Helper()
	raw, err := os.ReadFile("config/admission/reboot_client_policy.yaml")
	require.NoError(t, err)
	name := AdmissionPolicyName + "-" + ns
	var n int
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &p))
			p.Name = name
			require.NoError(t, admin.Create(context.Background(), &p))
			n++
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &b))
			require.Nil(t, b.Spec.MatchResources, "the shipped binding covers every namespace")
			// As shipped: covering every namespace (PolicyInForce
			// trusts no binding narrower than config/admission's). The
			// tests run one at a time, and the policy is removed at
			// the test's end.
			b.Name, b.Spec.PolicyName = name, name
			require.NoError(t, admin.Create(context.Background(), &b))
			n++
		}
	}
	require.Equal(t, 2, n, "config/admission has a policy and a binding")
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = admin.Delete(context.Background(), &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
		// The API server unloads it within moments: the next test's
		// reboot clients (other namespaces) must not meet it.
		time.Sleep(500 * time.Millisecond)
	})
	return name
}

// rebootClient returns a client of a new user holding exactly the shipped
// reboot-client role in ns.
func rebootClient(t *testing.T, ns, name string) client.Client {
	t.Helper()
	rules, _ := rolesOf(t, "config/rbac/reboot_client_role.yaml")
	require.NotEmpty(t, rules)
	c, err := client.New(asUser(t, name+"-"+ns, rules, ns), client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// change applies f to a fresh read of host and updates it as c.
func change(ctx context.Context, c client.Client, ns, host string, f func(*metal3.BareMetalHost)) error {
	var h metal3.BareMetalHost
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: host}, &h); err != nil {
		return err
	}
	f(&h)
	return c.Update(ctx, &h)
}

// waitDenied retries a change of a label of host as c (a new value each
// time) until the API server denies it (a new policy takes a moment to
// load), and fails if it never does.
func waitDenied(t *testing.T, c client.Client, ns, host string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := change(context.Background(), c, ns, host, func(h *metal3.BareMetalHost) {
			metav1.SetMetaDataLabel(&h.ObjectMeta, "probe", strconv.FormatInt(time.Now().UnixNano(), 10))
		})
		if err != nil && strings.Contains(err.Error(), "reboot client") {
			return
		}
		require.True(t, time.Now().Before(deadline), "the change was never denied: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRebootClientChangesOnlyAnnotations (issue 39, point 2): under the
// admission policy of config/admission, an identity with the shipped
// reboot-client role can write its reboot annotations and nothing else of
// a host: not spec.bmc (address, TLS verification, credentials), not
// spec.online, not a label (--unmanaged-hosts selects on labels), not the
// detached annotation; an operator's identity (update on hosts, not a
// reboot client) and one with the verb "configure" still can. On the old
// code config/admission did not exist, and the client rewrote spec.bmc.
func TestRebootClientChangesOnlyAnnotations(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	newBMH(t, admin, ns, "h1")
	installPolicy(t, admin, ns)
	rc := rebootClient(t, ns, "reboot-client")

	waitDenied(t, rc, ns, "h1")
	for name, f := range map[string]func(*metal3.BareMetalHost){
		"address":     func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "redfish://10.6.6.6/redfish/v1/Systems/1" },
		"tls":         func(h *metal3.BareMetalHost) { h.Spec.BMC.DisableCertificateVerification = true },
		"credentials": func(h *metal3.BareMetalHost) { h.Spec.BMC.CredentialsName = "other-bmc" },
		"online":      func(h *metal3.BareMetalHost) { h.Spec.Online = false },
		"label":       func(h *metal3.BareMetalHost) { h.Labels["rebootkit.io/unmanaged"] = "true" },
		"detached": func(h *metal3.BareMetalHost) {
			metav1.SetMetaDataAnnotation(&h.ObjectMeta, metal3.DetachedAnnotation, "")
		},
		"legacy": func(h *metal3.BareMetalHost) {
			metav1.SetMetaDataAnnotation(&h.ObjectMeta, LegacyStatusAnnotation, "{}")
		},
		"finalizer": func(h *metal3.BareMetalHost) { h.Finalizers = append(h.Finalizers, "x.io/y") },
	} {
		err := change(ctx, rc, ns, "h1", f)
		assert.ErrorContains(t, err, "reboot client", "%s: a reboot client's change must be denied", name)
	}
	assert.Error(t, rc.Delete(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"}}))

	// Its own requests, through the reboot package's client.
	cl := &reboot.Client{Hosts: &RebootHosts{Client: rc, Namespace: ns}, Key: "fencer", Now: time.Now}
	tk, err := cl.Request(ctx, "h1", power.ModeHard)
	require.NoError(t, err, "a reboot client writes its request")
	require.NoError(t, cl.Release(ctx, tk), "and removes it")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}), "the bare reboot annotation")

	// Identities with more than the role still configure hosts.
	operator, err := client.New(asUser(t, "operator-"+ns, []rbacv1.PolicyRule{{APIGroups: []string{"metal3.io"},
		Resources: []string{"baremetalhosts"}, Verbs: []string{"get", "update"}}}, ns), client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, change(ctx, operator, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "redfish://10.0.0.2/redfish/v1/Systems/1" }))
	rules, _ := rolesOf(t, "config/rbac/reboot_client_role.yaml")
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts"}, Verbs: []string{"configure"}})
	both, err := client.New(asUser(t, "both-"+ns, rules, ns), client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, change(ctx, both, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "redfish://10.0.0.3/redfish/v1/Systems/1" }))
	require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Labels["rebootkit.io/unmanaged"] = "true" }))

	var h metal3.BareMetalHost
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	assert.Equal(t, "redfish://10.0.0.3/redfish/v1/Systems/1", h.Spec.BMC.Address, "direct read: no client's address")
	assert.True(t, h.Spec.Online)
	assert.NotContains(t, h.Annotations, metal3.DetachedAnnotation)
}

// trap is an HTTP endpoint that counts the requests it gets (a Redfish
// login would carry the host's password).
func trap(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func redfishAt(s *httptest.Server) string {
	return "redfish+http://" + strings.TrimPrefix(s.URL, "http://") + "/redfish/v1/Systems/1"
}

// TestBMCChangedDuringRequestNotUsed (issue 39, point 2): a host's
// spec.bmc rewritten while its reboot is pending, where no admission
// policy has been in force since before the request, gets neither the
// host's credentials nor a reading (the trap endpoint sees no request),
// and the controller says why; with the policy in force since before the
// request, the change (then made by an identity with more than the
// reboot-client role) is used. On the old code the controller logged in
// to the new address at once.
func TestBMCChangedDuringRequestNotUsed(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	for _, withPolicy := range []bool{false, true} {
		ns := newNamespace(t, admin)
		bmc, atBMC := trap(t)
		evil, atEvil := trap(t)
		newBMH(t, admin, ns, "h1")
		require.NoError(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
			Data: map[string][]byte{"username": []byte("admin"), "password": []byte("h1-pw")}}))
		require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(bmc) }))
		p := &Powers{WithoutAdmissionPolicy: true, Client: admin, Secrets: admin, Namespace: ns, Timeout: 5 * time.Second, PolicySettle: time.Second,
			Pool: power.NewPool(power.PoolConfig{CallTimeout: time.Second, ConnectTimeout: time.Second})}
		t.Cleanup(func() { _ = p.Close() })
		if withPolicy {
			p.PolicyName = installPolicy(t, admin, ns)
			waitDenied(t, rebootClient(t, ns, "probe"), ns, "h1")
			time.Sleep(1100 * time.Millisecond) // PolicySettle
		}
		r := &reboot.Reconciler{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Now: time.Now, Power: p.Controller}
		cl := &reboot.Client{Hosts: &RebootHosts{Client: admin, Namespace: ns}, Key: "fencer", Now: time.Now}
		_, err := cl.Request(ctx, "h1", power.ModeHard)
		require.NoError(t, err)
		_, _ = r.Reconcile(ctx, "h1") // the pass that sees the request, pinning the BMC
		var rec v1alpha1.RebootRecord
		require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &rec))
		require.NotNil(t, rec.Spec.BMC, "the record pins the BMC of the pending reboot")
		assert.Equal(t, redfishAt(bmc), rec.Spec.BMC.Address)
		require.Positive(t, atBMC.Load(), "the host's own BMC was asked")

		// The address changes (by the admin: where the policy is in
		// force, only such an identity can).
		require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(evil) }))
		_, err = r.Reconcile(ctx, "h1")
		if !withPolicy {
			require.ErrorIs(t, err, ErrBMCChanged)
			assert.NotContains(t, err.Error(), "h1-pw")
			assert.Zero(t, atEvil.Load(), "no request reached the new address")
			// Restored, it is used again.
			require.NoError(t, change(ctx, admin, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(bmc) }))
			_, err = r.Reconcile(ctx, "h1")
			assert.NotErrorIs(t, err, ErrBMCChanged)
		} else {
			assert.NotErrorIs(t, err, ErrBMCChanged)
			assert.Positive(t, atEvil.Load(), "a change under the policy is used")
		}
	}
}
