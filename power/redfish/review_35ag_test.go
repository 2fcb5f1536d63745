package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestReview35ag_PercentEncodedSpellingSplitsPressWindow (redfish.go's
// doc: "The windows are kept per endpoint and system in the package,
// shared by every Controller of the process for the same Endpoint (by its
// Origin: every spelling of one BMC ... is one)"; endpoint.go Origin: "Two
// spellings of one BMC ... give one origin"): a BMC behind a proxy at
// /~bmc1, spelled https://proxy/~bmc1 by one Controller and
// https://proxy/%7Ebmc1 (RFC 3986 6.2.2.2: "~" and "%7E" are one URI) by
// the next one (the host's Target replaced after a Secret rotation, or
// its address rewritten by another inventory tool). Origin keeps the
// escaped path as written (u.EscapedPath(), no percent-encoding
// normalised), so the two are two "BMCs" to the window registry: a
// ForceOff fence by the first Controller opens no window for the second,
// whose soft Off 5 s later reads On (the BMC's reads are 20 s stale) and
// presses the button: the fenced host runs again. The control (the same
// spelling twice) keeps the host off. Ground truth: the fake hardware.
// Same with "%2a"/"%2A", "%31"/"1" and an IDN host in Unicode and in
// punycode (TestReview35ag_OriginSplitsSpellingsOfOneBMC).
func TestReview35ag_PercentEncodedSpellingSplitsPressWindow(t *testing.T) {
	for _, second := range []string{"/~bmc1", "/%7Ebmc1"} {
		clk := fake.NewClock(time.Time{})
		hw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
		b := redfishtest.NewBMC(clk.Real, hw, "admin", secret)
		b.Quirks.NoGraceful = true // soft off is a press
		other := redfishtest.NewBMC(clk.Real, fake.NewPower(clk.Real, fake.PowerConfig{}), "admin", secret)
		p := newProxied35ag(t, b, other)
		epA, epB := p.srv.URL+"/~bmc1", p.srv.URL+second
		t.Cleanup(func() { redfish.ForgetWindowsOf(epA); redfish.ForgetWindowsOf(epB) })
		cfg := redfish.Config{Endpoint: epA, SystemID: "1", Username: "admin", Password: secret, RootCAs: p.pool, Now: clk.Real}
		cA, err := redfish.Connect(context.Background(), cfg)
		require.NoError(t, err)
		require.NoError(t, cA.Off(ctx, power.ModeHard), "the fence: ForceOff")
		require.False(t, hw.HardwareOn())
		_ = cA.Close()
		clk.Advance(5 * time.Second)
		cfg.Endpoint = epB
		cB, err := redfish.Connect(context.Background(), cfg)
		require.NoError(t, err, "%s reaches the same BMC", epB)
		err = cB.Off(ctx, power.ModeSoft)
		_ = cB.Close()
		oA, _ := redfish.Origin(epA)
		oB, _ := redfish.Origin(epB)
		t.Logf("second spelling %s (origin %s vs %s): soft Off 5 s after the ForceOff: %v; resets %v", second, oA, oB, err, b.Resets())
		clk.Advance(time.Minute)
		require.False(t, hw.HardwareOn(),
			"second spelling %s: ground truth: the host fenced off 5 s before runs again: a press went out on a stale On read because Origin split one BMC in two (%s vs %s); resets %v",
			second, oA, oB, b.Resets())
	}
}

// TestReview35ag_OriginSplitsSpellingsOfOneBMC (endpoint.go Origin: "Two
// spellings of one BMC ... give one origin, so that one BMC is one
// endpoint to the window registry and to session sharing"): spellings
// that every HTTP client and proxy treats as one URL (RFC 3986 6.2.2:
// case of percent-encoding hex digits, percent-encoded unreserved
// characters; an IDN host as Unicode and as its punycode, which
// net/http dials and sends as the same ASCII name) give different
// origins. Each split is the window registry's safety net lost
// (TestReview35ag_PercentEncodedSpellingSplitsPressWindow), one more
// session and login slot for the BMC in a Pool keyed by Origin.
func TestReview35ag_OriginSplitsSpellingsOfOneBMC(t *testing.T) {
	for _, pair := range [][2]string{
		{"https://proxy/bmc%2a", "https://proxy/bmc%2A"},
		{"https://proxy/~bmc1", "https://proxy/%7Ebmc1"},
		{"https://proxy/bmc1", "https://proxy/bmc%31"},
		{"https://proxy/r%c3%bcck/bmc1", "https://proxy/r%C3%BCck/bmc1"},
		{"https://bücher.example", "https://xn--bcher-kva.example"},
	} {
		a, err := redfish.Origin(pair[0])
		require.NoError(t, err)
		b, err := redfish.Origin(pair[1])
		require.NoError(t, err)
		if a != b {
			t.Errorf("one BMC, two origins: %s -> %s and %s -> %s", pair[0], a, pair[1], b)
		}
	}
}

// newProxied35ag is a proxy as newProxied35af's (it routes by the
// decoded, cleaned path, as nginx does) with BMCs at /~bmc1 and /bmc2.
func newProxied35ag(t *testing.T, bmc1, bmc2 http.Handler) *proxied35af {
	p := &proxied35af{auth: map[string][]string{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clean := path.Clean(r.URL.Path)
		for name, h := range map[string]http.Handler{"~bmc1": bmc1, "bmc2": bmc2} {
			prefix := "/" + name
			if clean != prefix && !strings.HasPrefix(clean, prefix+"/") {
				continue
			}
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

// TestReview35ag_PathParameterDotDotResetTargetPowersAnotherPathBMC
// (transport.go plainPath: a path must name "one resource whatever the
// server or a proxy in front of it makes of it"; redfish.go: no request is
// sent off the endpoint, whatever URI the BMC gave): BMC 1 behind
// https://proxy/bmc1 names its Reset target
// "/..;/bmc2/redfish/v1/Systems/1/Actions/ComputerSystem.Reset". The
// segment "..;" is ".." with an (empty) path parameter (RFC 2396 3.3):
// a proxy that, as servlet containers (Tomcat, Jetty) and the gateways
// built on them do, drops a segment's ";parameters" before resolving dot
// segments routes /bmc1/..;/bmc2/... to BMC 2. plainPath only refuses a
// segment that is exactly "." or "..", so host 1's Off powers off host 2
// (same fleet credentials). Ground truth: BMC 2's reset log and hw2.
func TestReview35ag_PathParameterDotDotResetTargetPowersAnotherPathBMC(t *testing.T) {
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
			_, _ = w.Write([]byte(strings.ReplaceAll(rec.Body.String(), `"`+target+`"`, `"/..;/bmc2`+target+`"`)))
			return
		}
		b1.ServeHTTP(w, r)
	})
	// The proxy: a servlet-style router, path parameters dropped from
	// every segment, then dot segments resolved, then routed by prefix.
	routes := map[string]http.Handler{"bmc1": hostile1, "bmc2": b2}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(r.URL.Path, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		clean := path.Clean(strings.Join(segs, "/"))
		for name, h := range routes {
			prefix := "/" + name
			if clean != prefix && !strings.HasPrefix(clean, prefix+"/") {
				continue
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = strings.TrimPrefix(clean, prefix), ""
			if r2.URL.Path == "" {
				r2.URL.Path = "/"
			}
			h.ServeHTTP(w, r2)
			return
		}
		http.NotFound(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c2, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.True(t, hw2.HardwareOn(), "host 2 runs")
	c, err := redfish.Connect(c2, redfish.Config{Endpoint: srv.URL + "/bmc1", SystemID: "1",
		Username: "admin", Password: "fleet-pw", BasicAuth: true, RootCAs: pool})
	require.NoError(t, err)
	defer c.Close()
	offErr := c.Off(c2, power.ModeHard)
	t.Logf("host 1's Off: %v; BMC 1 resets %v, BMC 2 resets %v", offErr, b1.Resets(), b2.Resets())
	require.Empty(t, b2.Resets(), "host 1's Off was sent to BMC 2 (its reset log); host 2 on: %v", hw2.HardwareOn())
	require.True(t, hw2.HardwareOn(), "host 2 was powered off by host 1's Off")
}
