package redfish_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_RequestPathHeadersNotGofishs (review round 21, issue 35;
// round 20's power/redfish/path.go: reqPath.do "sends one request as
// gofish would (the same headers ...)"). gofish, made with
// ReuseConnections (as the adapter makes it), sends "Connection:
// keep-alive" on every request; the Controller's own request path does
// not, so the login (gofish) and every later read and reset (reqPath)
// differ in their headers, against the documented claim (a BMC that keeps
// HTTP/1.x connections alive only when asked would now cost a TCP and
// TLS handshake per read; not shown against a real BMC). Ground truth:
// the headers the BMC received, by request.
func TestReview35_RequestPathHeadersNotGofishs(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw")
	var mu sync.Mutex
	got := map[string][]string{} // "METHOD path" -> header names
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			if k != "X-Auth-Token" && k != "Content-Length" && k != "Accept-Encoding" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		mu.Lock()
		got[r.Method+" "+strings.TrimSuffix(r.URL.Path, "/")] = names
		mu.Unlock()
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.State(ctx)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	byGofish := got["GET /redfish/v1"]         // the service root, read by gofish's login
	byPath := got["GET /redfish/v1/Systems/1"] // the system, read on the request path
	t.Logf("gofish: %v; request path: %v", byGofish, byPath)
	require.NotEmpty(t, byGofish)
	assert.Equal(t, byGofish, byPath, "the request path's headers are not gofish's")
}

// adapterClock is a settable clock for Config.Now.
type adapterClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *adapterClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *adapterClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestReview35_RefusedPressWithSlowReloginBlocksPresses (review round
// 21, issue 35 point 6 with round 20's "a reset never handed to the HTTP
// client opens no lost window"). The session expired: the BMC answers
// the soft Off's press (PushPowerButton, an iLO without Graceful types)
// 401, and applies nothing. The re-login the adapter then makes takes
// longer than the caller's deadline (a BMC slow to log in): the call
// gives up waiting for it. That error has no HTTP status, so the adapter
// takes the POST for one that got no answer: it opens the lost window
// (LostLanding + SoftTimeout + StaleReads) and records a press, although
// the BMC answered it with a refusal. A minute later, the session
// re-established, the next soft Off of the same host is refused, not
// sent ("the OS may still be shutting down"), for minutes, and reads
// inside the window are not trusted: a press the BMC refused blocks the
// presses that would work. Ground truth: the emulator's reset log (no
// press applied before the retry).
func TestReview35_RefusedPressWithSlowReloginBlocksPresses(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", "pw")
	b.Quirks.NoGraceful = true
	var mu sync.Mutex
	expired, slowLogin := false, false
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		exp, slow := expired, slowLogin
		if exp && r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
			expired = false // the session is gone: this request is refused
		}
		mu.Unlock()
		if exp && r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if slow && r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/Sessions") {
			time.Sleep(800 * time.Millisecond) // a BMC slow to log in
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := &adapterClock{t: time.Now()}
	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: roots, Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, c.TogglesOff(power.ModeSoft), "a soft power-off is a press here")

	mu.Lock()
	expired, slowLogin = true, true
	mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err1 := c.Off(cctx, power.ModeSoft)
	cancel()
	time.Sleep(time.Second) // the re-login ends: the session works again
	require.Empty(t, b.Resets(), "the BMC applied no press (it answered 401)")
	clk.Advance(time.Minute) // past StaleReads (30 s) of the refused attempt
	err2 := c.Off(ctx, power.ModeSoft)
	t.Logf("soft Off refused with 401, re-login slower than the caller: %v; a minute later: %v; resets %v", err1, err2, b.Resets())
	assert.NoError(t, err2, "a press the BMC refused (401) blocks the next press of the host")
	assert.Equal(t, []string{"PushPowerButton"}, b.Resets())
}
