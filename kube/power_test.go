package kube

import (
	"context"
	"crypto/x509"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

func TestParseBMCAddress(t *testing.T) {
	for addr, want := range map[string]BMCTarget{
		"ipmi://10.0.0.5":                                               {Protocol: "ipmi", Host: "10.0.0.5", Port: 623},
		"ipmi://[fd00::5]:6230":                                         {Protocol: "ipmi", Host: "fd00::5", Port: 6230},
		"redfish://10.0.0.5/redfish/v1/Systems/1":                       {Protocol: "redfish", Endpoint: "https://10.0.0.5", SystemID: "1"},
		"redfish+http://bmc:8000/redfish/v1/Systems/abc":                {Protocol: "redfish", Endpoint: "http://bmc:8000", SystemID: "abc"},
		"redfish+https://bmc/redfish/v1/Systems/System.Embedded.1":      {Protocol: "redfish", Endpoint: "https://bmc", SystemID: "System.Embedded.1"},
		"idrac-redfish://10.1.1.1/redfish/v1/Systems/System.Embedded.1": {Protocol: "redfish", Endpoint: "https://10.1.1.1", SystemID: "System.Embedded.1"},
		"redfish://bmc": {Protocol: "redfish", Endpoint: "https://bmc"},
		"redfish-virtualmedia+http://bmc:8000/redfish/v1/Systems/2":          {Protocol: "redfish", Endpoint: "http://bmc:8000", SystemID: "2"},
		"idrac-virtualmedia://10.1.1.1/redfish/v1/Systems/System.Embedded.1": {Protocol: "redfish", Endpoint: "https://10.1.1.1", SystemID: "System.Embedded.1"},
		"ipmi://10.0.0.5:6230?privilegelevel=administrator":                  {Protocol: "ipmi", Host: "10.0.0.5", Port: 6230, Privilege: "ADMINISTRATOR"},
		"ipmi://10.0.0.5?privilegelevel=OPERATOR":                            {Protocol: "ipmi", Host: "10.0.0.5", Port: 623, Privilege: "OPERATOR"},
	} {
		got, err := ParseBMCAddress(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	for _, bad := range []string{"", "10.0.0.5", "http://bmc", "ipmi://bmc:99999", "redfish://user:pw@bmc/redfish/v1/Systems/1", "libvirt://x", "redfish:///redfish/v1/Systems/1", "ipmi://h?privilegelevel=callback"} {
		_, err := ParseBMCAddress(bad)
		assert.ErrorIs(t, err, ErrBMCAddress, bad)
		if err != nil {
			assert.NotContains(t, err.Error(), "pw@", "no credentials echoed")
		}
	}
}

func FuzzParseBMCAddress(f *testing.F) {
	f.Add("redfish://10.0.0.5/redfish/v1/Systems/1")
	f.Add("ipmi://[::1]:623")
	f.Add("idrac-redfish+http://h/x/Systems/y/")
	f.Fuzz(func(t *testing.T, addr string) {
		tg, err := ParseBMCAddress(addr)
		if err != nil {
			return
		}
		switch tg.Protocol {
		case "ipmi":
			if tg.Port < 1 || tg.Port > 65535 || tg.Host == "" {
				t.Fatalf("%q: %+v", addr, tg)
			}
		case "redfish":
			if !strings.HasPrefix(tg.Endpoint, "https://") && !strings.HasPrefix(tg.Endpoint, "http://") || strings.Contains(tg.SystemID, "/") {
				t.Fatalf("%q: %+v", addr, tg)
			}
		default:
			t.Fatalf("%q: protocol %q", addr, tg.Protocol)
		}
	})
}

// TestPowersOnAPIServer: the power controller of a host comes from its
// spec.bmc and its credentials Secret (here an emulated Redfish BMC over
// HTTPS); a changed Secret gives a new controller.
func TestPowersOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := redfishtest.NewBMC(time.Now, hw, "admin", "s3cret")
	srv := bmc.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	host := strings.TrimPrefix(srv.URL, "https://")
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}}))
	require.NoError(t, c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://" + host + "/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}))
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: ns, RootCAs: pool}
	defer p.Close()
	pc, err := p.Controller("h1")
	require.NoError(t, err)
	s, err := pc.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	again, err := p.Controller("h1")
	require.NoError(t, err)
	s, err = again.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)

	// Wrong credentials in the Secret (a new resourceVersion: a new
	// login): the call fails, without the password.
	var sec corev1.Secret
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1-bmc"}, &sec))
	sec.Data["password"] = []byte("wrong-pass")
	require.NoError(t, c.Update(ctx, &sec))
	pc, err = p.Controller("h1")
	require.NoError(t, err)
	_, err = pc.State(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrAuth)
	assert.NotContains(t, err.Error(), "wrong-pass")
	_, err = p.Controller("missing")
	assert.Error(t, err)
}

// TestPowersReadSecretsWithGetOnly (issue 28, A3): under a user that may
// only get Secrets (as the documented RBAC says) and a manager's cached
// client, the power controller of a host is built at once: the Secret is
// read directly with get. On the old code the Secret went through the
// manager's cache, whose informer needs list and watch on every Secret
// and never syncs: no host ever got a power controller.
func TestPowersReadSecretsWithGetOnly(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := adminClient(t)
	ns := newNamespace(t, c)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hw, "admin", "s3cret"))
	defer srv.Close()
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}}))
	require.NoError(t, c.Create(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1", CredentialsName: "h1-bmc"}}}))
	ucfg := asController(t, ns) // the generated role: get on Secrets, nothing more
	mgr, err := ctrl.NewManager(ucfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	p := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second}
	pc, err := p.Controller("h1")
	require.NoError(t, err)
	st, err := pc.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, st)
}
