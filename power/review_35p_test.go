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

// TestReview35_OneSystemsRefusalBacksOffNeighboursJoin: issue 35 point 1
// ("a host's failure never refuses another host whose credentials ...
// work"). A chassis manager serves systems 1, 2 and 3 with one account;
// it answers 401 to every request for system 2 (a blade whose own
// controller rejects the token the chassis forwards, or an account
// without rights on that blade), while the same session reads systems 1
// and 3. Host A (system 1) logs in. Host B (system 2) joins A's session:
// its discovery gets 401, power/redfish logs in again through the Pool's
// gate (the BMC accepts the credentials: the gate records a success) and
// gets 401 again; the Pool's attach counts this ErrAuth once against the
// login, so every host of these credentials without a session of its
// own waits out the 30 s authentication back-off, doubling to 30 min.
// Host C (system 3), whose credentials the BMC accepted a moment before,
// is refused (ErrBackoff) without a request. Ground truth: the emulator's
// login log (every login with these credentials was accepted).
func TestReview35_OneSystemsRefusalBacksOffNeighboursJoin(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.InsufficientPrivilege","message":"no rights on this blade"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	target := func(id string) power.Target {
		return power.Target{BMC: srv.URL, Config: "admin/v1/" + id, Login: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
			return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: roots})
		}}
	}
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	_, err := pool.Controller("a", target("1")).State(ctx)
	require.NoError(t, err)
	_, err = pool.Controller("b", target("2")).State(ctx)
	require.Error(t, err, "system 2 refuses every request")
	clk.Advance(time.Second)
	_, err = pool.Controller("c", target("3")).State(ctx)
	t.Logf("logins %d (all accepted: %v); C: %v", b.Logins(), b.LoginLog(), err)
	assert.NoError(t, err, "host C, whose credentials the BMC just accepted, refused because system 2 refuses its requests")
	assert.NotErrorIs(t, err, power.ErrBackoff)
}
