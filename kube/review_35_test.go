package kube

import (
	"context"
	"crypto/x509"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

type review35Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *review35Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *review35Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// review35Host makes BareMetalHost name at system id of the emulator at
// hostport, with its own credentials Secret (as the baremetal-operator
// has it: one Secret per host, bound to it by BMCHostLabel).
func review35Host(t *testing.T, c client.Client, name, hostport, id, user, pass string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-bmc",
		Labels: map[string]string{BMCHostLabel: name}},
		Data: map[string][]byte{"username": []byte(user), "password": []byte(pass)}}))
	require.NoError(t, c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://" + hostport + "/redfish/v1/Systems/" + id,
			CredentialsName: name + "-bmc"}}}))
}

// TestReview35_PerHostSecretsShareNoSession (issue 35, point 2, at the
// kube controller): four blades behind one chassis's Redfish service, each
// with its own credentials Secret (the baremetal-operator's layout, and
// the only one BMCHostLabel can bind: the label names one host), all with
// the same username and password; the default Pool (two sessions per
// BMC), each host read every 5 s for three minutes. Powers keys
// Target.Login by the Secret's name and resourceVersion, so the four hosts
// never share the one session their identical credentials allow: they
// fight over two sessions, and the Pool refuses reads (busy, for up to a
// LoginInterval) and logs in more than once a minute. Ground truth: the
// emulator's login log.
func TestReview35_PerHostSecretsShareNoSession(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "s3cret")
	for _, id := range []string{"2", "3", "4"} {
		b.AddSystem(id, fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	srv := b.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	hostport := strings.TrimPrefix(srv.URL, "https://")
	c := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
	for _, id := range []string{"1", "2", "3", "4"} {
		review35Host(t, c, "blade"+id, hostport, id, "admin", "s3cret")
	}
	clk := &review35Clock{t: fake.Epoch}
	pool := power.NewPool(power.PoolConfig{Now: clk.Now})
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", RootCAs: roots, Pool: pool}
	defer p.Close()
	refused := 0
	var loginAt []time.Time
	for range 36 {
		for _, id := range []string{"1", "2", "3", "4"} {
			before := b.Logins()
			pc, err := p.Controller("blade" + id)
			require.NoError(t, err)
			if _, err := pc.State(context.Background()); err != nil {
				refused++
			}
			for range b.Logins() - before {
				loginAt = append(loginAt, clk.Now())
			}
		}
		clk.Advance(5 * time.Second)
	}
	most := 0
	for i := range loginAt {
		n := 0
		for j := i; j < len(loginAt) && loginAt[j].Sub(loginAt[i]) < time.Minute; j++ {
			n++
		}
		most = max(most, n)
	}
	t.Logf("144 reads: %d refused, %d logins, at most %d in a minute", refused, len(loginAt), most)
	assert.Zero(t, refused, "reads of hosts whose credentials work were refused")
	assert.LessOrEqual(t, most, 1, "logins per minute to one endpoint with one set of credentials")
}

// TestReview35_SecretRewriteBypassesAuthBackoff: a host's Secret holds a
// wrong password; something rewrites the Secret without fixing it (a
// label, an annotation, an external-secrets refresh): each rewrite is a
// new resourceVersion, so a new Target.Login, so a login with no back-off.
// The BMC sees a failed login per rewrite instead of at most two a minute
// (the README's "at most two logins a minute with a wrong password"):
// BMCs lock accounts after a few. Ground truth: the emulator's login log.
func TestReview35_SecretRewriteBypassesAuthBackoff(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "s3cret")
	srv := b.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
	review35Host(t, c, "h1", strings.TrimPrefix(srv.URL, "https://"), "1", "admin", "wrong")
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", RootCAs: roots}
	defer p.Close()
	ctx := context.Background()
	start := time.Now()
	for i := range 6 {
		if i > 0 {
			var sec corev1.Secret
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "h1-bmc"}, &sec))
			sec.Annotations = map[string]string{"refreshed": time.Now().Format(time.RFC3339Nano)}
			require.NoError(t, c.Update(ctx, &sec)) // same wrong password, new resourceVersion
		}
		pc, err := p.Controller("h1")
		require.NoError(t, err)
		_, err = pc.State(ctx)
		require.ErrorIs(t, err, power.ErrAuth)
	}
	failed := 0
	for _, r := range b.LoginLog() {
		if !r.OK {
			failed++
		}
	}
	t.Logf("%d failed logins with one wrong password in %s", failed, time.Since(start).Round(time.Millisecond))
	require.Less(t, time.Since(start), 30*time.Second)
	assert.LessOrEqual(t, failed, 2, "failed logins with the same wrong password within a minute")
}

// TestReview35_DeletedHostNeverForgotten (issue 35, point 5, at the kube
// controller): a BareMetalHost is reconciled (its power state read
// through the Pool), then deleted, and its deletion reconciled, wired as
// rebootkit-controller's main wires it. The Pool's Forget in
// Powers.Controller runs only when Powers.Controller is called for a host
// that is gone, but the RebootController and reboot.Reconciler both
// return on the host's NotFound before they ask for its power controller:
// the deleted host's entry, login and BMC state stay in the Pool for as
// long as the process runs (its session until IdleTimeout). Ground truth:
// the emulator's count of open sessions.
func TestReview35_DeletedHostNeverForgotten(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "s3cret")
	srv := b.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := fakeclient.NewClientBuilder().WithScheme(scheme).Build()
	review35Host(t, c, "h1", strings.TrimPrefix(srv.URL, "https://"), "1", "admin", "s3cret")
	pool := power.NewPool(power.PoolConfig{})
	powers := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: "ns", RootCAs: roots, Pool: pool}
	defer powers.Close()
	rec := &reboot.Reconciler{Hosts: &RebootHosts{Client: c, Namespace: "ns"}, Power: powers.Controller, Now: time.Now}
	ctl := &RebootController{Reconciler: rec, Namespace: "ns", Client: c, Ownership: Ownership{NoOperator: true}}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "h1"}}
	_, err := ctl.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 1, b.Sessions(), "the host's power was never read: the test tests nothing")

	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, req.NamespacedName, &bmh))
	require.NoError(t, c.Delete(ctx, &bmh))
	_, err = ctl.Reconcile(ctx, req)
	require.NoError(t, err)
	// Forget closes the host's session (its logout, in the background):
	// the emulator's own count of open sessions shows whether it ran.
	assert.Eventually(t, func() bool { return b.Sessions() == 0 }, 2*time.Second, 10*time.Millisecond,
		"the deleted host's BMC session is still open: the Pool never forgot the host")
}
