package power_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
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

// chassis35al serves one Redfish service for systems "1" and "2" through
// a wrapper: while deny401 is set, a token-bearing GET of deniedPath is
// answered 401 (a per-system privilege, a front proxy's 401, a BMC
// rebooting its web server: not a refusal of the credentials, which the
// emulator keeps accepting at login); while expire is set, every
// token-bearing request is answered 401 (the session expired).
type chassis35al struct {
	b       *redfishtest.BMC
	srv     *httptest.Server
	roots   *x509.CertPool
	deny401 atomic.Bool
	expire  atomic.Bool
}

func newChassis35al(t *testing.T, deniedPath string) *chassis35al {
	t.Helper()
	c := &chassis35al{}
	c.b = redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	c.b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, basic := r.BasicAuth()
		tok := r.Header.Get("X-Auth-Token") != "" || basic
		if tok && (c.expire.Load() ||
			c.deny401.Load() && r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == deniedPath) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InsufficientPrivilege","message":"denied"}}`))
			return
		}
		c.b.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	c.roots = x509.NewCertPool()
	c.roots.AddCert(c.srv.Certificate())
	return c
}

func (c *chassis35al) target(id string) power.Target { return c.targetAuth(id, false) }

func (c *chassis35al) targetAuth(id string, basic bool) power.Target {
	return power.Target{BMC: c.srv.URL, Config: "admin/" + bmcPassword, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: c.srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: c.roots, BasicAuth: basic})
	}}
}

// TestReview35al_CallDenied401AfterGoodReloginBacksOffNeighbour (review
// 35al, issue 35 item 1: "a host's failure never refuses another host
// whose credentials differ or whose session is open"; package doc:
// "Calls on an open session are always tried, whatever any login's
// back-off"). Round 37 made Pool.release back the credentials off on any
// call ending in ErrAuth. power/redfish turns every 401 of a call into
// ErrAuth, also when the call's in-call re-login just SUCCEEDED (the
// credentials are proven, the Pool's gate recorded the success) and the
// retried request is refused 401 again: a 401 that is no refusal of the
// credentials (a per-system privilege on a chassis, a front proxy, a BMC
// web server restarting). Host A's one read then retires the session
// shared with host B (same chassis, same credentials, session open and
// working) and starts a 30 s authentication back-off: B's next read is
// refused with ErrBackoff without touching the BMC. Ground truth: the
// emulator's own login log (every login with these credentials accepted)
// and B's system, which the BMC serves to the session all along.
func TestReview35al_CallDenied401AfterGoodReloginBacksOffNeighbour(t *testing.T) {
	ch := newChassis35al(t, "/redfish/v1/Systems/1")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err, "B's session is open and works")

	ch.deny401.Store(true) // A's system only: not the credentials
	_, err = a.State(ctx)
	require.Error(t, err, "A's system is denied")
	for _, l := range ch.b.LoginLog() {
		require.True(t, l.OK, "every login with these credentials was accepted: %+v", ch.b.LoginLog())
	}
	clk.Advance(time.Second)
	_, err = b.State(ctx)
	assert.NoError(t, err,
		"host B (credentials accepted at the BMC's last login, session open a second ago) refused because host A's system answered 401; logins: %+v", ch.b.LoginLog())
	clk.Advance(time.Second)
	assert.NoError(t, b.Off(ctx, power.ModeSoft), "host B's fence refused because host A's system answered 401")
}

// TestReview35al_InCallRefusedReloginCountsTwice (review 35ak's fix,
// pool_call.go release; package doc Guarantees: "at least AuthBackoff,
// doubling with each refusal"; doc: "after an authentication failure
// AuthBackoff (30 s) doubling"). power/redfish's in-call re-login goes
// through ConnectInfo.Gate, whose done(err) already records the refusal
// (failedLocked); round 37 made Pool.release record the call's ErrAuth
// once more. One refused login is counted as two: the next login waits
// 2×AuthBackoff (60 s), and each further in-call refusal quadruples the
// pause instead of doubling it, so an operator who fixed the Secret
// waits twice as long as documented. Ground truth: the emulator's own
// login count, with the Pool's clock moved 31 s past the one refusal.
func TestReview35al_InCallRefusedReloginCountsTwice(t *testing.T) {
	ch := newChassis35al(t, "")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ch.b.Logins())

	// The password is rotated on the BMC, and the session then expires.
	ch.b.SetCredentials("admin", "Rotated-0ther")
	ch.expire.Store(true)
	_, err = a.State(ctx)
	require.ErrorIs(t, err, power.ErrAuth, "the in-call re-login was refused")
	require.Equal(t, 2, ch.b.Logins(), "one in-call re-login, refused")

	clk.Advance(31 * time.Second) // AuthBackoff: 30 s by default
	_, err = a.State(ctx)
	require.Equal(t, 3, ch.b.Logins(),
		"one refusal, then 31 s (AuthBackoff 30 s): the next login is due; the call's error: %v", err)
}

// TestReview35al_BasicAuthSystem401BacksOffNeighbour (review 35al, same
// root cause as TestReview35al_CallDenied401AfterGoodReloginBacksOffNeighbour,
// with BasicAuth): a 401 to host A's own system (the account lacks the
// privilege on that blade; a proxy in front of it) is, for the Pool, a
// refusal of the credentials: it starts a 30 s authentication back-off
// of the login, and host B, whose reads with the same credentials the
// BMC answers (its last one a second before), is refused with
// ErrBackoff. Ground truth: the BMC answers B's system to these
// credentials throughout (the wrapper denies system 1 only).
func TestReview35al_BasicAuthSystem401BacksOffNeighbour(t *testing.T) {
	ch := newChassis35al(t, "/redfish/v1/Systems/1")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.targetAuth("1", true))
	b := pool.Controller("b", ch.targetAuth("2", true))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)

	ch.deny401.Store(true) // A's system only: not the credentials
	_, errA := a.State(ctx)
	require.Error(t, errA, "A's system is denied")
	clk.Advance(time.Second)
	_, err = b.State(ctx)
	require.NoError(t, err,
		"host B (its reads with these credentials answered a second ago) refused because host A's system answered 401 (A's error: %v)", errA)
}

// TestReview35al_CallRefusedByBackoffCountsAsRefusal (review 35al, same
// root cause as TestReview35al_InCallRefusedReloginCountsTwice: Pool.release
// takes any call error matching ErrAuth for a refusal). The package doc: "A
// call that needs a login during a back-off is not tried: it fails at once
// with an error matching ErrBackoff and the failure that started it (so
// errors.Is(err, ErrAuth) still tells the operator the password is
// wrong)". Host C joins host A's shared session after the password was
// rotated and the session expired: its re-login is refused (one refusal,
// counted by the gate) and the session is left to A. A's next read meets
// the expiry too; its in-call re-login is not tried (ErrBackoff, which
// matches ErrAuth), and release counts that untried login as a second
// refusal: the back-off doubles to 60 s although the BMC refused one
// login. Ground truth: the emulator's own login log (one refused login),
// with the Pool's clock moved 31 s on.
func TestReview35al_CallRefusedByBackoffCountsAsRefusal(t *testing.T) {
	ch := newChassis35al(t, "")
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ch.b.Logins())

	ch.b.SetCredentials("admin", "Rotated-0ther")
	ch.expire.Store(true)
	c := pool.Controller("c", ch.target("2"))
	_, errC := c.State(ctx)
	require.ErrorIs(t, errC, power.ErrAuth, "C's join: the re-login was refused")
	_, errA := a.State(ctx)
	require.ErrorIs(t, errA, power.ErrAuth)
	refused := 0
	for _, l := range ch.b.LoginLog() {
		if !l.OK {
			refused++
		}
	}
	require.Equal(t, 1, refused, "the BMC refused one login: %+v", ch.b.LoginLog())
	n := ch.b.Logins()

	clk.Advance(31 * time.Second) // AuthBackoff: 30 s by default
	_, err = a.State(ctx)
	require.Equal(t, n+1, ch.b.Logins(),
		"one refusal, then 31 s: the next login is due (C: %v; A: %v; now: %v)", errC, errA, err)
}
