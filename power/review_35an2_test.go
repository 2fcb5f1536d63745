package power_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rotated35an2 serves one Redfish service for systems "1" and "2"; once
// rotated is set, the BMC's password was changed: every request that
// sends the old one with basic auth is refused 401 and counted (ground
// truth: what the BMC's lock-out counter sees).
type rotated35an2 struct {
	srv     *httptest.Server
	roots   *x509.CertPool
	rotated atomic.Bool
	refused atomic.Int64
}

func newRotated35an2(t *testing.T) *rotated35an2 {
	t.Helper()
	c := &rotated35an2{}
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, basic := r.BasicAuth(); basic && c.rotated.Load() {
			c.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.GeneralError","message":"invalid credentials"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	c.roots = x509.NewCertPool()
	c.roots.AddCert(c.srv.Certificate())
	return c
}

func (c *rotated35an2) target(id string) power.Target {
	return power.Target{BMC: c.srv.URL, Config: "admin/" + bmcPassword, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: c.srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: c.roots, BasicAuth: true})
	}}
}

// TestReview35an2_BasicAuthRotatedPasswordForgottenNeighbourNoBackoff
// (review 35an2; package doc: "after an authentication failure
// AuthBackoff (30 s) doubling up to MaxAuthBackoff (30 min), so a BMC
// with a wrong password sees at most two logins a minute with it";
// Guarantees: "Between two logins to a BMC with credentials it refused
// last there are at least AuthBackoff ... (a Forget of every host using
// them does not shorten it)"; issue 35: login back-off per
// endpoint+credentials). With basic auth every call sends the
// credentials (CallAuthenticator: "the call was a login, in effect").
// Round 39's release keeps the session and counts nothing when another
// host's call with the credentials was answered since this host's
// (creds.answeredHost): a single answer to host B, a host since deleted
// (Forget), exempts every later 401 of host A for ever. The BMC's
// password is rotated; A, polled once a second, sends the refused
// password with every poll: 60 refused requests a minute (a BMC that
// locks the account after a few failures locks it), never backed off,
// while nothing else ever calls. Ground truth: the 401s the BMC served.
func TestReview35an2_BasicAuthRotatedPasswordForgottenNeighbourNoBackoff(t *testing.T) {
	ch := newRotated35an2(t)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = b.State(ctx)
	require.NoError(t, err)
	pool.Forget("b") // host B deleted

	ch.rotated.Store(true) // the BMC's password changed
	var last error
	for i := 0; i < 60; i++ {
		clk.Advance(time.Second)
		_, last = a.State(ctx)
		require.Error(t, last)
	}
	assert.ErrorIs(t, last, power.ErrAuth)
	// The first refused read, then at most two logins a minute
	// (AuthBackoff 30 s); round 38 sent three.
	assert.LessOrEqual(t, ch.refused.Load(), int64(3),
		"requests with the refused password in one minute (one read, then AuthBackoff 30 s: at most two logins); last: %v", last)
}

// TestReview35an2_System401EveryPollLogsInAgain (review 35an2; package
// doc: a failure of the host's own system "is the host's own, and backs
// that host alone off, Backoff doubling up to MaxBackoff"; issue 35:
// sessions shared per BMC, one login per BMC and credentials, not per
// host and try). Host A's system answers 401 to the session (a
// per-blade privilege, a proxy), B's is served. power/redfish meets
// every 401 of a call with a re-login through the gate, which succeeds;
// the repeated read is refused again: ErrAuth. Round 39's release keeps
// the session since the login proved the credentials (okDuring), and
// backs nothing off: A's next poll does it all again. A polled once a
// second makes one login a second to the BMC for ever (each also
// logging out the session B shares), never backed off. Ground truth:
// the emulator's own login log.
func TestReview35an2_System401EveryPollLogsInAgain(t *testing.T) {
	ch := newChassis35al(t, "/redfish/v1/Systems/1")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)
	before := ch.b.Logins()

	ch.deny401.Store(true) // A's system only
	var last error
	for i := 0; i < 60; i++ {
		clk.Advance(time.Second)
		_, last = a.State(ctx)
		require.Error(t, last)
	}
	_, err = b.State(ctx)
	require.NoError(t, err, "B is served all along")
	// Backoff 1 s doubling: 1+2+4+8+16+32 s, about six tries a minute.
	assert.LessOrEqual(t, ch.b.Logins()-before, 8,
		"logins in one minute for one host whose own system answers 401 (Backoff doubling: about six); last: %v", last)
}
