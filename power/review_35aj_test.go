package power_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowLogout serves b, answering every logout (DELETE of a session)
// after delay: a BMC slow to log sessions out.
func slowLogout(b *redfishtest.BMC, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/redfish/v1/SessionService/Sessions/") {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(delay):
			}
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35_WrongPasswordClosesWorkingSessionDuringLogout (review
// round 19, issue 35 points 1 and 2; the documented rule "a wrong
// password never closes another host's working session"): the bound (2)
// is held by working hosts A and B, idle. Host M names a system not on
// the chassis: its first try logs in one over the bound (its credentials
// not yet proven there), the system is not found, and its session, which
// would take the BMC over the bound, is logged out; the BMC is slow to
// log out (1 s). Meanwhile host W, with a wrong password never tried
// here, calls. Its login is no probe any more (the BMC counts 3 sessions,
// one being logged out: the probe needs ep.sessions <= MaxSessions), so
// it takes the eviction path: the endpoint has made no eviction yet, and
// a working, idle session (B's, the least recently used) is closed for
// W's place. W's login is then refused (ErrAuth). B's session was closed
// for a wrong password; its next call logs in again. Ground truth: the emulator's login log (A's
// credentials log in a second time) and its open sessions.
func TestReview35_WrongPasswordClosesWorkingSessionDuringLogout(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(slowLogout(b, time.Second))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	bb := pool.Controller("b", loginTarget(srv, "2", "secret-b/v1"))
	m := pool.Controller("m", loginTarget(srv, "9", "secret-m/v1"))
	cp := x509.NewCertPool()
	cp.AddCert(srv.Certificate())
	wcfg := redfish.Config{Endpoint: srv.URL, SystemID: "3", Username: "admin", Password: "stale-password", RootCAs: cp}
	w := pool.Controller("w", power.Target{BMC: srv.URL, Config: "secret-w/v1",
		Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, wcfg) }})

	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = bb.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = m.State(ctx)
	t.Logf("M (system missing): %v", err)
	require.Error(t, err)
	_, err = w.State(ctx)
	t.Logf("W (wrong password): %v", err)
	require.ErrorIs(t, err, power.ErrAuth)

	_, err = a.State(ctx)
	require.NoError(t, err)
	_, err = bb.State(ctx)
	require.NoError(t, err)
	good := redfishtest.Fingerprint("admin", bmcPassword)
	n := 0
	for _, l := range b.LoginLog() {
		if l.Credentials == good {
			n++
		}
	}
	// A, B and M logged in once each with the right password.
	assert.Equal(t, 3, n, "a working host's session was closed for the login of a wrong password: it logged in again")
}
