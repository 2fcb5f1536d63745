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

// TestReview35_BasicAuthOutageHoldsReadsLongAfter (review round 26,
// issue 35; pool_call.go heldReadLocked: reads on basic-auth credentials
// "go one at a time, a pause apart (AuthBackoff, doubled for each one
// sent and left unanswered since, up to MaxAuthBackoff)"). A healthy
// blade with basic auth, polled every 10 s; its BMC becomes unreachable
// for 20 minutes (a switch reload, a BMC firmware update: requests hang
// unanswered, as they do for a password the BMC holds back), then
// answers again, with the same, right password. The hold cannot tell an
// outage from a rotated password: its pause doubled with every probe
// the outage left unanswered (30 s, 1, 2, 4, 8 min ...), so once the BMC
// is back the host's reads are refused without being sent ("a password
// changed on the BMC?") for many minutes: its state stays unknown to the
// monitor, a remediation or a rolling reboot, long after the BMC came
// back. Ground truth: the BMC's count of reads it received after it came
// back, and when the first one arrived.
func TestReview35_BasicAuthOutageHoldsReadsLongAfter(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	var down atomic.Bool
	var after atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			<-r.Context().Done() // unreachable: no answer
			return
		}
		after.Add(1)
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 250 * time.Millisecond})
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
	c := pool.Controller("h1", power.Target{BMC: srv.URL, Config: "1/basic", Login: "admin/pw",
		Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
	ctx := context.Background()
	_, err := c.State(ctx)
	require.NoError(t, err, "the blade answers")
	down.Store(true)
	for range 120 { // 20 minutes unreachable, polled every 10 s
		clk.Advance(10 * time.Second)
		_, _ = c.State(ctx)
	}
	down.Store(false) // back, the same password
	after.Store(0)
	back := clk.Now()
	var firstOK time.Duration = -1
	var held int
	var last error
	for range 180 { // 30 minutes, polled every 10 s
		clk.Advance(10 * time.Second)
		_, err := c.State(ctx)
		if err == nil {
			firstOK = clk.Now().Sub(back)
			break
		}
		last = err
		held++
	}
	t.Logf("after the BMC came back: %d reads failed (last: %v); first answered after %v (-1: none in 30 min); requests the BMC received: %d", held, last, firstOK, after.Load())
	assert.True(t, firstOK >= 0 && firstOK <= time.Minute, "a healthy blade's read answered within a minute of its BMC coming back (answered after %v)", firstOK)
}
