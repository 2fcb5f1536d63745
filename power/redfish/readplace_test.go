package redfish_test

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

// TestReadOverdueGivesPlaceUp (issue 35, review round 22: dead blades'
// reads held a session's read places until their deadline): with
// MaxInFlight 1 and blades 2 and 3 dead (their reads hang at the BMC
// until their caller gives up), blade 1's reads are answered while both
// dead blades are read again and again: an overdue read gives its place
// up, and the dead blades' later reads share one place of their own.
// The BMC never sees more than MaxInFlight, plus that one place, plus
// the reads that just went overdue (one per dead blade), in flight at
// once. Once blade 2 answers again, its reads are answered too. Ground
// truth: the server's own count of requests in flight.
func TestReadOverdueGivesPlaceUp(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw")
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	var dead2, dead3 atomic.Bool
	var inFlight, peak atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			id := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/")
			if id == "2" && dead2.Load() || id == "3" && dead3.Load() {
				<-r.Context().Done()
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ctx := context.Background()
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: roots, MaxInFlight: 1}
	c1, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	var cs []*redfish.Controller
	for _, id := range []string{"2", "3"} {
		cfg.SystemID = id
		c, err := redfish.Connect(power.WithConnectInfo(ctx, power.ConnectInfo{Shared: c1}), cfg)
		require.NoError(t, err)
		cs = append(cs, c)
	}
	dead2.Store(true)
	dead3.Store(true)
	stop := make(chan struct{})
	polled := make(chan struct{})
	for _, c := range cs {
		go func() {
			defer func() { polled <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, _ = c.State(rctx)
				cancel()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	var fails int
	for range 6 {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c1.State(rctx)
		cancel()
		if err != nil {
			t.Logf("blade 1's read: %v", err)
			fails++
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Zero(t, fails, "blade 1's reads failed while its dead neighbours were polled")

	dead2.Store(false) // blade 2 answers again: its reads are answered
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cs[0].State(rctx)
	cancel()
	assert.NoError(t, err, "blade 2's read once it answers again")
	close(stop)
	<-polled
	<-polled
	t.Logf("peak reads in flight at the BMC: %d", peak.Load())
	// MaxInFlight 1 + the suspect systems' one place + one overdue read
	// per dead blade.
	assert.LessOrEqual(t, peak.Load(), int32(1+1+2), "reads in flight at the BMC past the bound")
}
