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

// failingSystem serves b, with every GET of system id answered 503 (a
// blade whose controller is busy or being updated).
func failingSystem(b *redfishtest.BMC, id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/"+id) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.GeneralError","message":"busy"}}`))
			return
		}
		b.ServeHTTP(w, r)
	})
}

// loginTarget is systemTarget with its own login identity (another Secret,
// or another version of it, that the BMC happens to accept).
func loginTarget(srv *httptest.Server, id, login string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return power.Target{BMC: srv.URL, Config: login, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: pool})
	}}
}

// TestReview35_KeptSessionEvictsWorkingSession (review round 16): host A
// (system 1) has an open, working session, idle; the BMC's bound is one
// session. Host B (system 2, another login, not yet proven) logs in over
// the bound (the probe a new login may make), and its system then fails
// (503). Round 15 keeps B's session as B's login's shared session
// (keepLocked) and trims the endpoint back to its bound keeping that
// session: A's working session is the one logged out, for a session that
// serves no host, and the trim counts as the endpoint's eviction, so A's
// next call cannot evict the kept session for LoginInterval: A, whose
// session was open and whose credentials work, is refused (busy). Issue
// 35 point 1: "a host's failure never refuses another host whose
// credentials differ or whose session is open". Before round 15 B's
// session was logged out and A's call went through on its session.
// Ground truth: the emulator's login count (A logged in once).
func TestReview35_KeptSessionEvictsWorkingSession(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(failingSystem(b, "2"))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	bc := pool.Controller("b", loginTarget(srv, "2", "secret-b/v1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Logins())

	clk.Advance(time.Second)
	_, err = bc.State(ctx)
	require.Error(t, err, "B's system fails")
	t.Logf("B: %v", err)
	require.Equal(t, 2, b.Logins())

	clk.Advance(time.Second)
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	_, err = a.State(actx)
	assert.NoError(t, err, "A's session was open and its credentials work: a neighbour's failing system refused it")
	assert.Equal(t, 2, b.Logins(), "A logged in again: its working session was logged out for B's kept session")
}

// TestReview35_KeptSessionOutlivesWorkingSession (review round 16): the
// BMC's bound is two sessions. Host A (system 1) has an open, working
// session; host B's system 2 fails after its login, whose session round
// 15 keeps, serving no host. Host C (system 3, a third login) then logs
// in: one session must make way, and the Pool picks the least recently
// used: A's working session, not the kept one that serves nobody (its
// "last use" is the failed login). A's next call then needs a login and
// finds the endpoint's eviction spent for LoginInterval: refused (busy)
// although its session was open and its credentials work. Before round
// 15 B's session was logged out at once and C took its slot. Ground
// truth: the emulator's login count.
func TestReview35_KeptSessionOutlivesWorkingSession(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(failingSystem(b, "2"))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	bc := pool.Controller("b", loginTarget(srv, "2", "secret-b/v1"))
	cc := pool.Controller("c", loginTarget(srv, "3", "secret-c/v1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = bc.State(ctx)
	require.Error(t, err, "B's system fails")
	clk.Advance(time.Second)
	_, err = cc.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, b.Logins())

	clk.Advance(time.Second)
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	_, err = a.State(actx)
	assert.NoError(t, err, "A's session was open and its credentials work: it was closed for a session that serves no host")
	assert.Equal(t, 3, b.Logins(), "A logged in again: its working session was closed, the kept one stayed")
}

// TestReview35_MissingSystemsLoginForEver (review round 16): a chassis
// manager's blades were renumbered (or replaced): the eight hosts behind
// it, one login, all name a system the BMC no longer lists. Nothing heals
// this until an operator edits the inventory: it is the steady state. A
// system not found is never kept (round 15 keeps only a found system's
// failure), so no shared session exists and each host logs in for
// itself at its own back-off (1 s doubling to MaxBackoff, 2 min): 8
// logins every 2 minutes, 4 a minute, for ever. Issue 35 point 2: "at
// most one login per endpoint per minute in steady state". Ground truth:
// the emulator's login log (its clock is the Pool's), the last 10 of 20
// minutes of callers asking every 5 s.
func TestReview35_MissingSystemsLoginForEver(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var hosts []power.Controller
	for i := range 8 {
		id := string(rune('a' + i))
		hosts = append(hosts, pool.Controller("host-"+id, loginTarget(srv, "blade-"+id, "chassis-secret/v1")))
	}
	start := clk.Now()
	for clk.Now().Sub(start) < 20*time.Minute {
		for _, h := range hosts {
			_, _ = h.State(ctx)
		}
		clk.Advance(5 * time.Second)
		power.Sweep(pool) // the janitor, on the Pool's clock: idle sessions close
	}
	var steady []time.Time
	for _, l := range b.LoginLog() {
		if l.At.Sub(start) >= 10*time.Minute {
			steady = append(steady, l.At)
		}
	}
	t.Logf("logins: %d in all, %d in the last 10 min", b.Logins(), len(steady))
	assert.LessOrEqual(t, maxPerMinute(steady), 1, "logins to one endpoint in a minute of steady state")
}
