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

// TestReview35aa_BasicAuthDeadNeighbourHoldsHealthyReadsForEver (review
// round 27, issue 35 point 1: "a host's failure never refuses another
// host whose credentials differ or whose session is open"; pool_call.go
// heldReadLocked). A chassis with basic auth: blades 1 (host A) and 2
// (host D) share the credentials and both are connected. Blade 2 dies
// (its reads hang while the BMC answers the others: a dead blade) and
// is polled every 5 s by a monitor. Host A is healthy and read every 2
// minutes (a rare check); one of its reads hits a slow moment and runs
// out of time. From then on A's own last call is "unanswered", the last
// call with the credentials (D's) too, and none was answered within
// LoginInterval: A's reads are held "one at a time, a pause apart" with
// D's. D's monitor sends the one read each pause allows (it polls
// more often), so every one of A's checks falls inside a pause and is
// refused without being sent, for as long as the dead neighbour is
// polled (here 30 minutes): a dead blade refuses a healthy host with
// the right password and an open session, for ever. Ground truth: the
// BMC's own count of reads of blade 1 it received (none), and blade 1
// answers every read at once.
func TestReview35aa_BasicAuthDeadNeighbourHoldsHealthyReadsForEver(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var dead2, slow1 atomic.Bool
	var reads1 atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			id := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/")
			if id == "1" {
				reads1.Add(1)
			}
			if id == "2" && dead2.Load() || id == "1" && slow1.Load() {
				<-r.Context().Done() // a dead blade; blade 1's one slow moment
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 250 * time.Millisecond})
	host := func(name, sys string) power.Controller {
		cfg := redfish.Config{Endpoint: srv.URL, SystemID: sys, Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
		return pool.Controller(name, power.Target{BMC: srv.URL, Config: sys + "/basic", Login: "admin/pw",
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
	}
	a, d := host("A", "1"), host("D", "2")
	ctx := context.Background()
	for _, c := range []power.Controller{a, d} {
		_, err := c.State(ctx)
		require.NoError(t, err, "both blades answer")
	}
	dead2.Store(true) // blade 2 dies, for good
	slow1.Store(true) // host A's one slow moment
	_, err := a.State(ctx)
	require.Error(t, err, "A's read in its slow moment runs out of time")
	slow1.Store(false) // blade 1 answers at once again, for good
	reads1.Store(0)
	var checks, refused int
	var last error
	for step := 1; step <= 360; step++ { // 30 minutes
		clk.Advance(5 * time.Second)
		_, _ = d.State(ctx) // the dead blade's monitor
		if step%24 == 15 {  // A's check every 2 minutes (first 75 s after its slow moment), off D's probe steps
			checks++
			if _, err := a.State(ctx); err != nil {
				refused++
				last = err
			}
		}
	}
	t.Logf("host A (blade 1, healthy): %d of %d checks in 30 min refused (last: %v); reads of blade 1 the BMC received: %d", refused, checks, last, reads1.Load())
	assert.Zero(t, refused, "a healthy host's reads refused, not sent, while a dead neighbour with the same credentials is polled")
}
