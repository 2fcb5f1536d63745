package redfish_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Issue 14, adapter 1: on a BMC without Graceful* reset types, a soft off
// of a host whose state reads unknown (null, missing, Paused) or
// transitioning must not press the power button: the old adapter did, and
// powered on a host that was off (fenced).
func TestRegressionNoBlindToggle(t *testing.T) {
	for _, rep := range []fake.Report{{Unknown: 1}, {Unknown: 1, Seed: 1}, {Unknown: 1, Seed: 2}} {
		r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{Initial: power.StateOff, Report: rep})
		c := r.connect(t)
		err := c.Off(ctx, power.ModeSoft)
		require.Error(t, err)
		assert.Equal(t, power.ClassBusy, power.Classify(err), "%v", err)
		assert.Contains(t, err.Error(), "PushPowerButton")
		assert.Empty(t, r.bmc.Resets(), "a toggle was sent")
		assert.False(t, r.hw.HardwareOn(), "the fenced host was powered on")
	}
	// Transitioning (PoweringOn) and On: a soft off must not toggle while
	// the power is changing.
	r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{Initial: power.StateOff, Lag: 10 * time.Second})
	c := r.connect(t)
	require.NoError(t, c.On(ctx)) // On, not a toggle
	r.clk.Advance(time.Second)
	err := c.Off(ctx, power.ModeSoft)
	assert.Equal(t, power.ClassBusy, power.Classify(err))
	// Right after our reset, a read that says On may be an echo (a stale
	// BMC): no toggle within StaleReads (30 s) of it.
	r.clk.Advance(20 * time.Second)
	assert.Equal(t, power.ClassBusy, power.Classify(c.Off(ctx, power.ModeSoft)))
	// A fresh read that says On, long after our last reset: the toggle is
	// the right thing.
	r.clk.Advance(20 * time.Second)
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	assert.Equal(t, "PushPowerButton", r.bmc.Resets()[len(r.bmc.Resets())-1])
}

// Issue 14, adapter 2: a Connect that fails after logging in logs out.
func TestRegressionFailedConnectLogsOut(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	cfg := r.cfg
	cfg.SystemID = "no-such-system"
	_, err := redfish.Connect(ctx, cfg)
	require.Error(t, err)
	assert.Zero(t, r.bmc.Sessions(), "the failed Connect left its session open")
}

// Issue 14, adapter 3: errors while listing systems keep their HTTP status
// (gofish wraps them in a CollectionError).
func TestRegressionListErrorsKeepStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		class  power.Class
	}{{401, power.ClassFailed}, {503, power.ClassBusy}, {500, power.ClassFailed}} {
		r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
		r.bmc.FailNextGet("/redfish/v1/Systems/1", tc.status, "")
		cfg := r.cfg
		cfg.BasicAuth = true
		_, err := redfish.Connect(ctx, cfg)
		require.Error(t, err)
		var pe *power.Error
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, tc.status, pe.Status, "%v", err)
		assert.Equal(t, tc.class, pe.Class)
	}
}

// Issue 14, adapter 4: a service without a SessionService (sushy-tools)
// says to use basic auth.
func TestRegressionNoSessionService(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoSessionService: true}, fake.PowerConfig{})
	_, err := redfish.Connect(ctx, r.cfg)
	require.ErrorIs(t, err, redfish.ErrNoSessionService)
	assert.Contains(t, err.Error(), "BasicAuth")
	cfg := r.cfg
	cfg.BasicAuth = true
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	defer c.Close()
	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
}

// hanging wraps a handler: requests for which hang returns true never get
// an answer (until release is closed).
type hanging struct {
	h       http.Handler
	hang    func(*http.Request) bool
	release chan struct{}
}

func (x hanging) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if x.hang(r) {
		select {
		case <-x.release:
		case <-r.Context().Done():
		}
		return
	}
	x.h.ServeHTTP(w, r)
}

func tlsRig(t *testing.T, h http.Handler, cfg redfish.Config) (redfish.Config, *httptest.Server) {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cfg.Endpoint, cfg.RootCAs = srv.URL, pool
	return cfg, srv
}

// Issue 14, adapter 5: re-login after a 401 never blocks callers past their
// deadlines, even when the BMC never answers the old session's logout; and
// a call waiting for another one on the same BMC gives up at its deadline.
func TestRegressionReloginRespectsDeadlines(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{SessionRequests: 3}, fake.PowerConfig{})
	release := make(chan struct{})
	var hangGets atomic.Bool
	h := hanging{h: r.bmc, release: release, hang: func(req *http.Request) bool {
		return req.Method == http.MethodDelete || hangGets.Load() && req.Method == http.MethodGet
	}}
	cfg, srv := tlsRig(t, h, r.cfg)
	defer close(release)
	defer srv.CloseClientConnections()
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	for i := 0; i < 6; i++ { // the session expires on the way: re-login
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var err error
		within(t, 3*time.Second, func() { _, err = c.State(dctx) })
		cancel()
		require.NoError(t, err, "pass %d", i)
	}
	// A BMC that stops answering: the first caller waits for its own
	// deadline; a second caller with a short deadline gets busy in time.
	hangGets.Store(true)
	slow, cancelSlow := context.WithTimeout(ctx, 3*time.Second)
	defer cancelSlow()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = c.State(slow) }()
	time.Sleep(100 * time.Millisecond)
	quick, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	within(t, time.Second, func() { _, err = c.State(quick) })
	require.Error(t, err)
	assert.Equal(t, power.ClassBusy, power.Classify(err))
	cancelSlow()
	wg.Wait()
}

// within fails the test if f does not return within d (f is left running).
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("blocked for more than %v", d)
	}
}

// Issue 14, adapter 6: whatever the BMC echoes, no rendering of an error
// (Error(), %+v, %#v, slog) carries the password, the username, the
// basic-auth value or the session token.
func TestRegressionSecretsRedacted(t *testing.T) {
	const user = "operator7"
	secrets := func(token string) []string {
		s := []string{secret, user, base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))}
		if token != "" {
			s = append(s, token)
		}
		return s
	}
	check := func(t *testing.T, err error, token string) {
		t.Helper()
		require.Error(t, err)
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Error("x", "err", err)
		slog.New(slog.NewTextHandler(&buf, nil)).Error("x", "err", err)
		for _, rendering := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%v", err), buf.String()} {
			for _, s := range secrets(token) {
				assert.NotContains(t, rendering, s)
			}
		}
	}
	newEcho := func(t *testing.T) (*rig, redfish.Config) {
		r := newRig(t, redfishtest.Quirks{EchoErrors: true}, fake.PowerConfig{})
		r.bmc.SetCredentials(user, secret)
		cfg := r.cfg
		cfg.Username = user
		return r, cfg
	}
	t.Run("session login refused", func(t *testing.T) {
		_, cfg := newEcho(t)
		cfg.Password = secret + "x" // wrong: echoed back in the 401 body
		_, err := redfish.Connect(ctx, cfg)
		secretsWrong := cfg.Password
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secretsWrong)
		check(t, err, "")
	})
	t.Run("basic auth, listing fails", func(t *testing.T) {
		r, cfg := newEcho(t)
		cfg.BasicAuth = true
		r.bmc.FailNextGet("/redfish/v1/Systems", 500, "")
		_, err := redfish.Connect(ctx, cfg)
		check(t, err, "")
	})
	t.Run("basic auth, reset fails", func(t *testing.T) {
		r, cfg := newEcho(t)
		cfg.BasicAuth = true
		c, err := redfish.Connect(ctx, cfg)
		require.NoError(t, err)
		defer c.Close()
		r.bmc.FailNextReset(500, false)
		check(t, c.Off(ctx, power.ModeHard), "")
	})
	t.Run("session, reset fails", func(t *testing.T) {
		r, cfg := newEcho(t)
		c, err := redfish.Connect(ctx, cfg)
		require.NoError(t, err)
		defer c.Close()
		r.bmc.FailNextReset(400, false)
		err = c.Off(ctx, power.ModeHard)
		token := sessionToken(t, r)
		require.NotEmpty(t, token)
		check(t, err, token)
	})
}

// sessionToken finds the open session's token through the emulator (a
// login with the rig's credentials would open another).
func sessionToken(t *testing.T, r *rig) string {
	t.Helper()
	return r.bmc.Tokens()[0]
}

// Issue 14, adapter 7: a huge non-JSON error body is bounded.
func TestRegressionBoundedErrorBodies(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	r.bmc.FailNextGet("/redfish/v1/Systems/1", 500, strings.Repeat("x", 4<<20))
	_, err := c.State(ctx)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), redfish.MaxMessage+200)
}

// Issue 14, adapter 8: Connect with a system ID fetches that system, not
// every system; a re-login keeps the transport (no new TCP connection).
func TestRegressionRequestsAndConnections(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{SessionRequests: 4}, fake.PowerConfig{})
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(r.bmc)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cfg := r.cfg
	cfg.Endpoint, cfg.RootCAs, cfg.SystemID = srv.URL, pool, "1"
	before := r.bmc.Requests()
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	defer c.Close()
	connect := r.bmc.Requests() - before
	assert.LessOrEqual(t, connect, 3, "Connect with a system ID: service root, session, the system")
	for i := 0; i < 100; i++ { // sessions expire every 4 requests: 25 re-logins
		_, err := c.State(ctx)
		require.NoError(t, err)
	}
	// One connection for the requests, and another now and then when a
	// background logout overlaps a request (more under load); never one
	// per re-login, as with a transport per connect (26 or more here).
	t.Logf("100 state reads, 25 re-logins: %d TCP connections", conns.Load())
	assert.LessOrEqual(t, conns.Load(), int64(12), "re-logins opened new TCP connections")
}

// Issue 14, emulator: what Redfish clients expect of redfishtest.BMC.
func TestEmulatorSpeaksRedfish(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{ActionInfo: true}, fake.PowerConfig{})
	hc := r.srv.Client()
	do := func(method, path, token string, body io.Reader) (*http.Response, map[string]any) {
		req, err := http.NewRequest(method, r.srv.URL+path, body)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("X-Auth-Token", token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, m := do("GET", "/redfish", "", nil)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, map[string]any{"v1": "/redfish/v1/"}, m, "the version document")
	assert.Equal(t, "4.0", resp.Header.Get("OData-Version"))
	for _, p := range []string{"/redfish/v1/", "/redfish/v1/odata", "/redfish/v1/$metadata"} {
		resp, _ := do("GET", p, "", nil)
		assert.Equal(t, 200, resp.StatusCode, "%s is unauthenticated", p)
	}
	resp, _ = do("GET", "/redfish/v1/Systems", "", nil)
	assert.Equal(t, 401, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("WWW-Authenticate"))

	login := func() (string, string) {
		resp, _ := do("POST", "/redfish/v1/SessionService/Sessions", "", strings.NewReader(`{"UserName":"admin","Password":"`+secret+`"}`))
		require.Equal(t, 201, resp.StatusCode)
		tok, loc := resp.Header.Get("X-Auth-Token"), resp.Header.Get("Location")
		assert.NotContains(t, loc, tok, "the Location carries the token")
		return tok, loc
	}
	tok1, loc1 := login()
	tok2, loc2 := login()
	for _, p := range []string{"/redfish/v1/", "/redfish/v1/Systems", "/redfish/v1/SessionService", "/redfish/v1/SessionService/Sessions",
		"/redfish/v1/Systems/1/ResetActionInfo", "/redfish/v1/Systems/1", loc1} {
		resp, m := do("GET", p, tok1, nil)
		require.Equal(t, 200, resp.StatusCode, p)
		assert.NotEmpty(t, m["@odata.type"], "%s has no @odata.type", p)
		assert.NotEmpty(t, m["Name"], "%s has no Name", p)
	}
	_, sys := do("GET", "/redfish/v1/Systems/1", tok1, nil)
	assert.NotNil(t, sys["Boot"], "sushy needs a Boot object")
	for _, method := range []string{"PATCH", "PUT", "DELETE"} {
		resp, _ := do(method, "/redfish/v1/Systems/1", tok1, strings.NewReader(`{}`))
		assert.Equal(t, 405, resp.StatusCode, method)
	}
	// DELETE of session 2 with session 1's token ends session 2, not 1.
	u := strings.TrimPrefix(loc2, r.srv.URL)
	resp, _ = do("DELETE", u, tok1, nil)
	assert.Equal(t, 204, resp.StatusCode)
	resp, _ = do("GET", "/redfish/v1/Systems", tok1, nil)
	assert.Equal(t, 200, resp.StatusCode, "session 1 must live on")
	resp, _ = do("GET", "/redfish/v1/Systems", tok2, nil)
	assert.Equal(t, 401, resp.StatusCode, "session 2 must be gone")
}
