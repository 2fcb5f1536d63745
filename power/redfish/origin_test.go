package redfish_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
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

// elsewhere is another origin that records what reaches it.
type elsewhere struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // method, path, credentials headers and body of each request
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got = append(e.got, r.Method+" "+r.URL.Path+" token="+r.Header.Get("X-Auth-Token")+" auth="+r.Header.Get("Authorization")+" body="+string(body))
		e.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *elsewhere) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// redirecting answers 307 to to+path for the requests match selects, once
// on is set, and serves the BMC otherwise.
type redirecting struct {
	bmc   http.Handler
	to    func() string
	match func(*http.Request) bool
	on    atomic.Bool
	posts atomic.Int32 // login bodies that reached the redirect target on this origin
}

func (x *redirecting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/moved/redfish/v1/SessionService/Sessions" {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), secret) {
			x.posts.Add(1)
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/moved")
		r.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	if x.on.Load() && x.match(r) {
		w.Header().Set("Location", x.to()+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	x.bmc.ServeHTTP(w, r)
}

// TestRedirectsNeverCarryCredentialsOffOrigin (issue 35, point 7): a
// verified-TLS BMC that answers 307 to another origin (plain HTTP on
// loopback, another port) gets the redirect refused: the other origin sees
// no request at all (no session token, no basic-auth header, no login
// body), and the call fails with the BMC's error. A login is never
// redirected, even within the origin (its body is never sent twice).
func TestRedirectsNeverCarryCredentialsOffOrigin(t *testing.T) {
	isSystem := func(r *http.Request) bool { return r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/1" }
	isLogin := func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/redfish/v1/SessionService/Sessions"
	}
	for _, tc := range []struct {
		name      string
		basic     bool
		match     func(*http.Request) bool
		sameHost  bool // redirect within the BMC's own origin
		beforeUse bool // redirect from the start (the login)
	}{
		{name: "session token on a read", match: isSystem},
		{name: "basic auth on a read", basic: true, match: isSystem},
		{name: "login body", match: isLogin, beforeUse: true},
		{name: "login body within the origin", match: isLogin, beforeUse: true, sameHost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := newElsewhere(t)
			p := fake.NewPower(time.Now, fake.PowerConfig{})
			b := redfishtest.NewBMC(time.Now, p, "admin", secret)
			x := &redirecting{bmc: b, match: tc.match}
			cfg, srv := tlsRig(t, x, redfish.Config{Username: "admin", Password: secret, BasicAuth: tc.basic})
			x.to = func() string { return other.srv.URL }
			if tc.sameHost {
				x.to = func() string { return srv.URL + "/moved" }
			}
			x.on.Store(tc.beforeUse)
			c, err := redfish.Connect(context.Background(), cfg)
			if !tc.beforeUse {
				require.NoError(t, err)
				defer c.Close()
				x.on.Store(true)
				_, err = c.State(context.Background())
			}
			require.Error(t, err, "a redirected request succeeded")
			assert.Empty(t, other.requests(), "requests that reached another origin")
			assert.Zero(t, x.posts.Load(), "login bodies sent again to a redirect target")
			assert.NotContains(t, err.Error(), secret)
		})
	}
}

// TestRedirectErrorSaysSo: the error of a refused redirect matches
// redfish.ErrRedirect (the BMC's misbehaviour, said as such).
func TestRedirectErrorSaysSo(t *testing.T) {
	other := newElsewhere(t)
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", secret)
	x := &redirecting{bmc: b, to: func() string { return other.srv.URL },
		match: func(r *http.Request) bool { return r.URL.Path == "/redfish/v1/Systems/1" }}
	cfg, _ := tlsRig(t, x, redfish.Config{Username: "admin", Password: secret})
	c, err := redfish.Connect(context.Background(), cfg)
	require.NoError(t, err)
	defer c.Close()
	x.on.Store(true)
	_, err = c.State(context.Background())
	require.ErrorIs(t, err, redfish.ErrRedirect)
}

// recordingProxy is an HTTP proxy that records the CONNECTs it gets and
// refuses them.
func recordingProxy(t *testing.T) (addr string, connects func() []string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var got []string
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, req.Method+" "+req.Host)
				mu.Unlock()
				_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestEnvironmentProxyIsNotUsed (issue 35, point 8): with HTTPS_PROXY and
// HTTP_PROXY set in the environment (a controller's proxy for the
// internet), Connect reaches the BMC directly: the proxy sees nothing. The
// environment is read once per process, so the check runs in a child
// process started with the proxy variables set.
func TestEnvironmentProxyIsNotUsed(t *testing.T) {
	if os.Getenv("REDFISH_PROXY_CHILD") == "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := redfish.Connect(ctx, redfish.Config{Endpoint: "https://bmc-0.invalid", Username: "admin", Password: secret})
		if err == nil {
			t.Fatal("connected to a BMC that does not exist")
		}
		return
	}
	addr, connects := recordingProxy(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvironmentProxyIsNotUsed$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REDFISH_PROXY_CHILD=1", "HTTPS_PROXY=http://"+addr, "HTTP_PROXY=http://"+addr,
		"https_proxy=http://"+addr, "http_proxy=http://"+addr, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, connects(), "BMC traffic went through the environment's proxy")
}

// TestConfiguredProxyIsUsed: Config.Proxy routes the BMC's traffic
// through the proxy named, and only then.
func TestConfiguredProxyIsUsed(t *testing.T) {
	addr, connects := recordingProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := redfish.Connect(ctx, redfish.Config{Endpoint: "https://bmc-0.invalid", Username: "admin", Password: secret,
		Proxy: &url.URL{Scheme: "http", Host: addr}})
	require.Error(t, err)
	assert.Equal(t, []string{"CONNECT bmc-0.invalid:443"}, connects())
	assert.False(t, errors.Is(err, redfish.ErrRedirect))
}

// accepting answers every reset 202 Accepted with a task monitor at
// monitor (after the BMC applied it).
type accepting struct {
	bmc     http.Handler
	monitor string
}

func (a accepting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Actions/ComputerSystem.Reset") {
		rec := httptest.NewRecorder()
		a.bmc.ServeHTTP(rec, r)
		if rec.Code/100 == 2 {
			w.Header().Set("Location", a.monitor)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	a.bmc.ServeHTTP(w, r)
}

// TestResetAcceptedWithTaskMonitor (issue 35, point 9, the documented
// choice): a reset answered 202 Accepted with a task monitor succeeds
// without following the monitor (here on another origin, which would see
// the session token), and a later State read is the evidence of the
// change.
func TestResetAcceptedWithTaskMonitor(t *testing.T) {
	other := newElsewhere(t)
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", secret)
	cfg, _ := tlsRig(t, accepting{bmc: b, monitor: other.srv.URL + "/redfish/v1/TaskService/TaskMonitors/1"},
		redfish.Config{Username: "admin", Password: secret})
	c, err := redfish.Connect(context.Background(), cfg)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Off(context.Background(), power.ModeHard))
	s, err := c.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, power.StateOff, s, "the later read is the evidence")
	assert.Equal(t, []string{"ForceOff"}, b.Resets())
	assert.Empty(t, other.requests(), "the task monitor was followed")
}

// TestResetAcceptedIsQueued (review 39 round 13, point 2): a reset
// answered 202 Accepted is reported through the call's power.Queued (the
// caller must not take the answer as the landing), and one answered
// otherwise is not.
func TestResetAcceptedIsQueued(t *testing.T) {
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", secret)
	cfg, _ := tlsRig(t, accepting{bmc: b, monitor: "/redfish/v1/TaskService/TaskMonitors/1"},
		redfish.Config{Username: "admin", Password: secret})
	c, err := redfish.Connect(context.Background(), cfg)
	require.NoError(t, err)
	defer c.Close()
	var q power.Queued
	require.NoError(t, c.Off(power.WithQueued(context.Background(), &q), power.ModeHard))
	assert.True(t, q.Queued(), "a 202 Accepted is a queued reset")
	var checked power.Queued
	require.NoError(t, c.OnChecked(power.WithQueued(context.Background(), &checked), func(context.Context) error { return nil }))
	assert.True(t, checked.Queued())

	plain := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", secret)
	cfg2, _ := tlsRig(t, plain, redfish.Config{Username: "admin", Password: secret})
	c2, err := redfish.Connect(context.Background(), cfg2)
	require.NoError(t, err)
	defer c2.Close()
	var none power.Queued
	require.NoError(t, c2.Off(power.WithQueued(context.Background(), &none), power.ModeHard))
	assert.Equal(t, []string{"ForceOff"}, plain.Resets())
	assert.False(t, none.Queued(), "a reset answered 200/204 is not queued")
}
