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
