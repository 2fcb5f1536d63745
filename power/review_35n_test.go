package power_test

import (
	"context"
	"crypto/x509"
	"fmt"
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
)

// TestReview35_BusyServiceAfterLoginStormsLogins: issue 35 point 2 ("at
// most one login per endpoint per minute in steady state") and the
// brief's "liveness with the fault still on". A chassis manager serves
// twenty blades' systems with one Redfish service and one account; it
// accepts logins but answers 503 (busy, a BMC under load or mid-update)
// to every read of the Systems collection and its members, for minutes.
// Since 81a807b, redfish.Connect marks any discovery failure after an
// accepted login as power.AfterLogin, and the Pool treats it as "the
// host's own": the login's back-off is reset (succeededLocked) and each
// host backs off alone. A 503 of the whole service is not one system's:
// every host of the chassis logs in and out on its own schedule, twenty
// logins every two minutes at steady state (and over a hundred in the
// first five minutes) to one endpoint with the fault still on. Ground
// truth: the emulator's own login counter.
func TestReview35_BusyServiceAfterLoginStormsLogins(t *testing.T) {
	const n = 20
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		b.AddSystem(fmt.Sprint(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	var busy atomic.Bool
	busy.Store(true)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.ServiceTemporarilyUnavailable","message":"busy"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	var ctrls []power.Controller
	for i := 1; i <= n; i++ {
		id := fmt.Sprint(i)
		ctrls = append(ctrls, pool.Controller("blade-"+id, power.Target{BMC: srv.URL, Config: "admin/v1/" + id, Login: "admin/v1",
			Connect: func(ctx context.Context) (power.Controller, error) {
				return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: roots})
			}}))
	}
	var before int
	for step := range 72 { // six minutes, each host read every 5 s
		if step == 48 {
			before = b.Logins() // the last two minutes: steady state
		}
		for _, c := range ctrls {
			_, _ = c.State(ctx)
		}
		clk.Advance(5 * time.Second)
	}
	total, last := b.Logins(), b.Logins()-before
	t.Logf("logins to one endpoint over six minutes: %d; in the last two: %d", total, last)
	assert.LessOrEqual(t, last, 2, "at most one login per endpoint per minute in steady state, with the service busy for ever")
	assert.LessOrEqual(t, total, 20, "a busy service is not twenty hosts' own failures: each logs in on its own")
}
