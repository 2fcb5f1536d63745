package power_test

import (
	"context"
	"crypto/x509"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameLoginTarget is host id's target with Login login (the credentials
// and TLS settings, as Target.Login's documentation lists them), with or
// without BasicAuth.
func sameLoginTarget(srv *httptest.Server, id, login string, basic bool) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, BasicAuth: basic, RootCAs: pool}
	mode := "session"
	if basic {
		mode = "basic"
	}
	return power.Target{BMC: srv.URL, Config: id + "/" + mode, Login: login,
		Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
}

// TestReview35_SessionlessStickyOverBound (review round 18, de788d6): a
// login's "opens no session" (creds.sessionless) is set by one BasicAuth
// Connect and kept for every later login of the same Target.Login. The
// Login's documented identity is the credentials and TLS settings, not
// the authentication mode: host X (BasicAuth) and host Y (session login,
// the same credentials) share a Login. Once X has connected, Y's session
// logins are "uncounted": with the bound (1) held by host A's session,
// the BMC carries two sessions for ever (MaxSessions is 1), and Y's
// session is in neither the bound nor the eviction order. Ground truth:
// the emulator's open sessions.
func TestReview35_SessionlessStickyOverBound(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	x := pool.Controller("x", sameLoginTarget(srv, "2", "creds-xy", true))
	y := pool.Controller("y", sameLoginTarget(srv, "3", "creds-xy", false))
	most := 0
	for step := 0; step < 60; step++ {
		for _, c := range []power.Controller{a, x, y} {
			_, _ = c.State(ctx)
		}
		most = max(most, b.Sessions())
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	t.Logf("most sessions open on the BMC: %d; logins %d", most, b.Logins())
	require.Positive(t, b.Logins())
	assert.LessOrEqual(t, most, 1, "MaxSessions is 1, yet Y's session logins are uncounted because X's BasicAuth connect marked their shared Login sessionless")
}
