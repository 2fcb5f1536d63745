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
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/require"
)

// TestReview35ak_IPMIInCallRefusedLoginThenPoolLoginAtOnce (review 35ak,
// issue 35 items 1/6, package doc Guarantees: "Between two logins to a
// BMC with credentials it refused last there are at least AuthBackoff").
// power/ipmi logs in again inside a call on its own (Controller.do: a
// session the BMC lost is opened again once), not through
// ConnectInfo.Gate; the doc excuses those logins from the one-at-a-time
// rule only. When that in-call login is refused (the BMC was reset with
// a rotated password, the host's Secret not updated yet), the call fails
// with ErrAuth and Pool.release only retires the session: no back-off is
// recorded, so the very next call logs in again through Target.Connect
// with the same refused credentials, at once. Ground truth: the
// emulator's own login count (RMCP+ Open Session Requests) on the BMC
// with the new password, with the Pool's clock standing still.
func TestReview35ak_IPMIInCallRefusedLoginThenPoolLoginAtOnce(t *testing.T) {
	clk := newClock()
	old, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
	require.NoError(t, err)
	addr := old.Addr()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	tg := ipmiTarget(old, bmcPassword)
	c := pool.Controller("h1", tg)
	ctx := context.Background()
	_, err = c.State(ctx)
	require.NoError(t, err, "first read: the password is right")
	require.Equal(t, 1, old.Logins())

	// The BMC is reset with a rotated password, on the same address.
	require.NoError(t, old.Close())
	rotated, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: "Rotated-0ther", Addr: addr})
	require.NoError(t, err)
	defer rotated.Close()

	var errs []error
	for range 4 { // reads back to back; the Pool's clock does not move
		_, err := c.State(ctx)
		errs = append(errs, err)
	}
	require.ErrorIs(t, errs[0], power.ErrAuth, "the in-call login was refused")
	require.LessOrEqual(t, rotated.Logins(), 1,
		"refused logins with one password, no time between them (AuthBackoff, 30 s by default); errors: %v", errs)
}

// TestReview35ak_BasicAuthRefusedCallThenLoginAtOnce (review 35ak, same
// root cause as TestReview35ak_IPMIInCallRefusedLoginThenPoolLoginAtOnce).
// With Redfish BasicAuth every call sends the credentials (the Pool counts
// such a call answered as a login, succeededLocked). Once the BMC's
// password is rotated, the first call's 401 (ErrAuth) only retires the
// session (Pool.release): no back-off starts, and the next call logs in
// again (Target.Connect, sending the refused credentials) at once.
// Ground truth: the requests the emulator refused that carried the old
// basic-auth credentials, with the Pool's clock standing still.
func TestReview35ak_BasicAuthRefusedCallThenLoginAtOnce(t *testing.T) {
	clk := newClock()
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
	var refused atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		b.ServeHTTP(rec, r)
		if u, pw, ok := r.BasicAuth(); ok && u == "admin" && pw == bmcPassword && rec.Code == http.StatusUnauthorized {
			refused.Add(1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := redfish.Config{Endpoint: srv.URL, Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	c := pool.Controller("h1", power.Target{BMC: srv.URL, Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, cfg)
	}})
	ctx := context.Background()
	_, err := c.State(ctx)
	require.NoError(t, err)
	b.SetCredentials("admin", "Rotated-0ther")
	var errs []error
	for range 4 {
		_, err := c.State(ctx)
		errs = append(errs, err)
	}
	require.ErrorIs(t, errs[0], power.ErrAuth)
	require.LessOrEqual(t, int(refused.Load()), 1,
		"requests with the refused credentials, no time between them (AuthBackoff, 30 s by default); errors: %v", errs)
}
