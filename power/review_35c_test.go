package power_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// wrongBasic counts the requests that reach a BMC with basic-auth
// credentials it refuses (the BMC's own view: each is a failed
// authentication, which BMCs count towards locking the account).
type wrongBasic struct {
	b *redfishtest.BMC
	n atomic.Int64
}

func (w *wrongBasic) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Basic ") {
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		if u, p, _ := strings.Cut(string(raw), ":"); u != w.b.Username || p != w.b.Password {
			w.n.Add(1)
		}
	}
	w.b.ServeHTTP(rw, r)
}

func basicTarget(srv *httptest.Server, id, password string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return power.Target{BMC: srv.URL, Config: id + "/basic/admin/" + password, Login: "basic/admin/" + password,
		Connect: func(ctx context.Context) (power.Controller, error) {
			return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: password,
				BasicAuth: true, RootCAs: pool})
		}}
}

// TestReview35_BasicAuthWrongPasswordNeverBacksOff: with BasicAuth the
// adapter's "login" (gofish.ConnectContext) is only an unauthenticated GET
// of the service root: it proves nothing about the password. Since
// 05cf8dd, redfish.connect calls ConnectInfo.LoggedIn right after it, so
// the Pool clears the credentials' back-off and marks them proven; the
// 401 of the system lookup that follows is then "the host's own" and backs
// nothing off. Every call with a stale password is another failed
// authentication at the BMC, at the callers' rate, for ever (an account
// lockout), where the Pool documents 30 s doubling to 30 min
// (PoolConfig.AuthBackoff). Ground truth: the requests with refused
// credentials the BMC received.
func TestReview35_BasicAuthWrongPasswordNeverBacksOff(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	wb := &wrongBasic{b: b}
	srv := httptest.NewTLSServer(wb)
	t.Cleanup(srv.Close)
	pool := newPool(t, newClock(), power.PoolConfig{}) // the clock stands still: any back-off holds
	ctx := context.Background()

	bad := pool.Controller("b", basicTarget(srv, "1", "stale"))
	_, err := bad.State(ctx)
	require.ErrorIs(t, err, power.ErrAuth, "the stale password is refused")
	first := wb.n.Load()
	require.NotZero(t, first)

	for i := range 5 {
		_, err = bad.State(ctx)
		assert.ErrorIs(t, err, power.ErrBackoff, "call %d after an authentication failure was not backed off", i+2)
	}
	assert.Equal(t, first, wb.n.Load(),
		"the BMC received the refused password again and again (%d requests with it after the first call's %d), with no back-off",
		wb.n.Load()-first, first)
}

// TestReview35_BasicAuthWrongPasswordEvictsWorkingSession: the same root
// cause makes a wrong password "proven", so its next login no longer
// probes over the bound but closes a working, idle session of another
// login for its place (round 2's fix of "a wrong password evicts a working
// session" is undone for BasicAuth). Ground truth: host A's session is
// closed (A logs in again).
func TestReview35_BasicAuthWrongPasswordEvictsWorkingSession(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var creates atomic.Int64 // GETs of the service root: one per Connect that logs in
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1" {
			creates.Add(1)
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1, IdleTimeout: time.Hour})
	ctx := context.Background()

	a := pool.Controller("a", basicTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	bad := pool.Controller("b", basicTarget(srv, "2", "stale"))
	for range 3 {
		clk.Advance(2 * time.Minute) // past the back-off of a first failure: the wrong password retries
		_, _ = bad.State(ctx)
	}
	before := creates.Load()
	_, err = a.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, creates.Load(), "host A's working session was closed for a login with a wrong password; A had to log in again")
}

// TestReview35_HungSystemLookupLogsInEveryCall: a BMC whose session
// service answers but whose system lookups hang (a wedged inventory
// service: the BMC's failure, not a fact about the host). Since 05cf8dd a
// Connect error after LoggedIn "backs no login off", including "a lookup
// that timed out" (ConnectInfo.LoggedIn's doc): every call logs in anew,
// creates a BMC session and times out, for as long as the BMC stays
// wedged, instead of backing off (PoolConfig.Backoff: 1 s doubling to 2
// min, on a clock that here stands still). Ground truth: the emulator's
// login count.
func TestReview35_HungSystemLookupLogsInEveryCall(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	var wg sync.WaitGroup
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			wg.Add(1)
			defer wg.Done()
			<-r.Context().Done() // the lookup never answers
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: 300 * time.Millisecond, CallTimeout: 2 * time.Second})
	ctx := context.Background()

	c := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	for range 5 {
		_, err := c.State(ctx)
		require.Error(t, err)
	}
	assert.LessOrEqual(t, b.Logins(), 1,
		"a BMC whose system lookups time out got a new login (and session) for every call, never backed off")
}

// TestReview35_SlowSystemLookupSplitsSharedLogin: blades behind one
// chassis manager with the same credentials, whose system lookups take a
// moment (300 ms: listing a chassis's systems is slow on real managers;
// the emulator answers at once). Since 05cf8dd, LoggedIn frees the BMC for
// the next login while the first Connect still looks its system up, and
// the session is offered for sharing only once that Connect returns: the
// second blade's first call logs in its own session with the same
// credentials instead of waiting for the first and sharing it (issue 35
// point 2: "share one session per endpoint and credentials"). The extra
// sessions stay open as long as their hosts are polled. Ground truth: the
// emulator's logins and open sessions.
func TestReview35_SlowSystemLookupSplitsSharedLogin(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			time.Sleep(300 * time.Millisecond)
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := newPool(t, newClock(), power.PoolConfig{})
	ctx := context.Background()

	var wg sync.WaitGroup
	for _, id := range []string{"1", "2", "3"} {
		c := pool.Controller("host"+id, systemTarget(srv, id, bmcPassword))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.State(ctx)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, b.Logins(), "hosts with the same credentials behind one BMC logged in more than once")
	assert.Equal(t, 1, b.Sessions(), "more than one BMC session is open for one login")
}
