package redfish_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/require"
)

// proxied35af is one HTTPS reverse proxy in front of two BMCs, each
// behind a path of its own (/bmc1, /bmc2): the layout Origin's doc names
// ("a path of its own (a BMC behind a proxy) is kept"), so that
// https://proxy/bmc1 and https://proxy/bmc2 are two BMCs, two origins.
// The proxy normalises the request path (path.Clean, as nginx and most
// reverse proxies do before routing) and logs, per BMC, the auth headers
// it forwarded: the ground truth of where credentials went.
type proxied35af struct {
	srv  *httptest.Server
	pool *x509.CertPool
	mu   sync.Mutex
	auth map[string][]string // "bmc1"/"bmc2" -> Authorization and X-Auth-Token values seen
}

func newProxied35af(t *testing.T, bmc1, bmc2 http.Handler) *proxied35af {
	p := &proxied35af{auth: map[string][]string{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clean := path.Clean(r.URL.Path)
		for name, h := range map[string]http.Handler{"bmc1": bmc1, "bmc2": bmc2} {
			prefix := "/" + name
			if clean != prefix && !strings.HasPrefix(clean, prefix+"/") {
				continue
			}
			p.mu.Lock()
			for _, v := range []string{r.Header.Get("Authorization"), r.Header.Get("X-Auth-Token")} {
				if v != "" {
					p.auth[name] = append(p.auth[name], v)
				}
			}
			p.mu.Unlock()
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(clean, prefix)
			if r2.URL.Path == "" {
				r2.URL.Path = "/"
			}
			r2.URL.RawPath = ""
			h.ServeHTTP(w, r2)
			return
		}
		http.NotFound(w, r)
	}))
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.srv.Certificate())
	return p
}

func (p *proxied35af) seen(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth[name]...)
}

func basic35af(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// TestReview35af_RedirectCarriesPasswordToAnotherPathBMC (issue 35 point
// 7, "never send credentials off the BMC"; redfish.go's doc "Credentials
// never leave the endpoint's origin", with Origin keeping the path as the
// BMC's identity): two BMCs behind one proxy, https://proxy/bmc1 and
// https://proxy/bmc2, different passwords. BMC 1 answers the read of its
// system with 307 to /bmc2/redfish/v1/Systems/1. The redirect check
// (transport.go sameOrigin) compares scheme, host and port only, so the
// client follows it with bmc1's basic-auth header: bmc1's password is sent
// to the other BMC. Origin (endpoint.go) says the two are different BMCs
// (and windows and session sharing treat them so), the redirect rule says
// they are one.
func TestReview35af_RedirectCarriesPasswordToAnotherPathBMC(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	b1 := redfishtest.NewBMC(time.Now, hw1, "admin", "pw-one")
	b2 := redfishtest.NewBMC(time.Now, hw2, "admin", "pw-two")
	hostile1 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems/1" {
			w.Header().Set("Location", "/bmc2/redfish/v1/Systems/1")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		b1.ServeHTTP(w, r)
	})
	p := newProxied35af(t, hostile1, b2)
	o1, err := redfish.Origin(p.srv.URL + "/bmc1")
	require.NoError(t, err)
	o2, err := redfish.Origin(p.srv.URL + "/bmc2")
	require.NoError(t, err)
	require.NotEqual(t, o1, o2, "Origin: two BMCs")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: p.srv.URL + "/bmc1", SystemID: "1",
		Username: "admin", Password: "pw-one", BasicAuth: true, RootCAs: p.pool})
	if err == nil {
		_, _ = c.State(ctx)
		_ = c.Close()
	}
	leaked := 0
	for _, v := range p.seen("bmc2") {
		if v == basic35af("admin", "pw-one") {
			leaked++
		}
	}
	require.Zero(t, leaked, "bmc1's password was sent to bmc2 (%s) %d times: credentials followed a redirect to another BMC", o2, leaked)
}

// TestReview35af_DotDotResetTargetPowersAnotherPathBMC (redfish.go's doc:
// "a Reset target that is not a path of the endpoint's ("/…") makes On and
// Off fail without sending anything"; "No request at all is sent off the
// origin, whatever URI the BMC gave"): BMC 1 behind https://proxy/bmc1
// names its Reset target "/../bmc2/redfish/v1/Systems/1/Actions/
// ComputerSystem.Reset". bmcPath (transport.go:59) accepts any "/…" with
// no "//", "\" or "@" (task.go checks ".." for a monitor, the reset target
// is not checked), gofish prefixes the endpoint, and the proxy resolves
// /bmc1/../bmc2/… to BMC 2: host 1's Off powers off host 2 (same fleet
// credentials), a host nobody asked to power. Ground truth: BMC 2's own
// reset log and hw2.
func TestReview35af_DotDotResetTargetPowersAnotherPathBMC(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	b1 := redfishtest.NewBMC(time.Now, hw1, "admin", "fleet-pw")
	b2 := redfishtest.NewBMC(time.Now, hw2, "admin", "fleet-pw")
	const target = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
	hostile1 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems/1" {
			rec := httptest.NewRecorder()
			b1.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write([]byte(strings.ReplaceAll(rec.Body.String(), `"`+target+`"`, `"/../bmc2`+target+`"`)))
			return
		}
		b1.ServeHTTP(w, r)
	})
	p := newProxied35af(t, hostile1, b2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.True(t, hw2.HardwareOn(), "host 2 runs")
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: p.srv.URL + "/bmc1", SystemID: "1",
		Username: "admin", Password: "fleet-pw", BasicAuth: true, RootCAs: p.pool})
	require.NoError(t, err)
	defer c.Close()
	_ = c.Off(ctx, power.ModeHard)
	require.Empty(t, b2.Resets(), "host 1's Off was sent to BMC 2 (its reset log); host 2 on: %v", hw2.HardwareOn())
	require.True(t, hw2.HardwareOn(), "host 2 was powered off by host 1's Off")
}

// TestReview35af_RespelledBMCNeverJoinsItsSharedSession (endpoint.go
// Origin: "Two spellings of one BMC ... give one origin, so that one BMC
// is one endpoint ... to session sharing"): two hosts of one chassis BMC,
// host A's endpoint spelled http://[::ffff:127.0.0.1]:P (an IPv4-mapped
// address, as an IPv6-only inventory writes it) and host B's
// http://127.0.0.1:P; same credentials, one HTTP client. Origin makes
// them one BMC and Config.sameLogin (session.go:190) accepts the offered
// session, but the joined Controller builds its URLs from its own
// endpoint, and the session's origin check (transport.go:102 sameOrigin,
// which compares host names literally) refuses every one of them
// (ErrOffOrigin, reported as ErrAfterLogin, not ErrNotShared): host B
// can never be controlled while A's session is open. In a Pool (which
// offers the shared session to every host of the same BMC and login, and
// kube names BMCs by Origin) that is host B refused for good: no fence,
// no State, no login of its own (ErrNotShared would make one). Same with
// "bmc" / "bmc." and "[::1]" / "[0:0::1]".
func TestReview35af_RespelledBMCNeverJoinsItsSharedSession(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	hwB := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", "pw")
	b.AddSystem("2", hwB)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	epA := fmt.Sprintf("http://[::ffff:127.0.0.1]:%d", port)
	epB := fmt.Sprintf("http://127.0.0.1:%d", port)
	oA, err := redfish.Origin(epA)
	require.NoError(t, err)
	oB, err := redfish.Origin(epB)
	require.NoError(t, err)
	require.Equal(t, oA, oB, "Origin: one BMC")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", srv.Listener.Addr().String()) // both spellings reach the one BMC
	}
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfgA := redfish.Config{Endpoint: epA, SystemID: "1", Username: "admin", Password: "pw", HTTPClient: hc}
	cA, err := redfish.Connect(ctx, cfgA)
	require.NoError(t, err)
	defer cA.Close()
	cfgB := cfgA
	cfgB.Endpoint, cfgB.SystemID = epB, "2"
	cB, err := redfish.Connect(power.WithConnectInfo(ctx, power.ConnectInfo{Shared: cA}), cfgB)
	if err != nil && errors.Is(err, power.ErrNotShared) {
		return // refused to share: the Pool logs host B in on its own
	}
	require.NoError(t, err, "host B (same BMC, same login, endpoint %s) accepted onto A's session (%s) and cannot use it", epB, epA)
	defer cB.Close()
	require.NoError(t, cB.Off(ctx, power.ModeHard))
	require.False(t, hwB.HardwareOn(), "host B not powered off")
}
