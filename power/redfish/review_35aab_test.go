package redfish_test

import (
	"context"
	"crypto/x509"
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

// TestReview35aa_CutReadsStillWorkedOnPassMaxInFlight (review round 26,
// issue 35; Config.MaxInFlight: "So the BMC, slow or not, fast or slow
// from the start, is sent at most MaxInFlight + 1 reads at once";
// readplace.go: a cut read's place is taken again cutGrace (10 ms) after
// its request returned, "for the BMC to notice the closed connection").
// The chassis of TestReview35_CachedSystemFreesSlowBMCReads (system 1
// answered from the BMC's cache at once, systems 2..12 in 3 s each,
// every read answered, 10 s deadlines, MaxInFlight 2), but its web
// server, like many an embedded HTTP/1.1 server, does not look at the
// connection while it works on a request: it finishes each read it
// began (3 s) and only then finds the connection closed. Every cut
// (the slow systems' reads, cut on system 1's quick answers) hands its
// place to another slow read 10 ms later while the BMC still works on
// the cut one, so the BMC works on many more than MaxInFlight + 1
// system reads at once. Ground truth: the server's own count of system
// reads it is working on (peak).
//
// Round 28 (the finding's option "give the doc a stated limit and change
// the test to assert that documented limit"): Config.MaxInFlight and
// readplace.go now state the limit as the reads sent and not returned
// (their connections open): at most MaxInFlight + 1; a BMC that goes on
// working on a cancelled read after its connection closed may be working
// on one more for each read cancelled while it still worked on it, a
// number the client cannot see or bound (a dead blade's cancelled read
// at such a BMC never ends). The server counts, as each system read
// arrives, the system reads it is working on whose connections are still
// open (the request's context is not done: the server noticed no close):
// that peak is asserted; the peak of all the reads it works on is logged.
func TestReview35aa_CutReadsStillWorkedOnPassMaxInFlight(t *testing.T) {
	const n, max = 12, 2
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw")
	for i := 2; i <= n; i++ {
		b.AddSystem(itoa35w(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	var inFlight, peak, peakOpen atomic.Int32
	var slow atomic.Bool
	var mu sync.Mutex
	working := map[*http.Request]struct{}{} // the system reads worked on
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			mu.Lock()
			working[r] = struct{}{}
			var open int32
			for q := range working {
				if q.Context().Err() == nil {
					open++ // its connection is open: the client still waits
				}
			}
			mu.Unlock()
			for p := peakOpen.Load(); open > p && !peakOpen.CompareAndSwap(p, open); p = peakOpen.Load() {
			}
			defer func() { mu.Lock(); delete(working, r); mu.Unlock() }()
			id := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/")
			if id != "1" && slow.Load() {
				time.Sleep(3 * time.Second) // asks the blade's controller; does not look at the connection meanwhile
			}
		}
		b.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ctx := context.Background()
	cfg := redfish.Config{Endpoint: srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: roots, MaxInFlight: max}
	c1, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	cs := []*redfish.Controller{c1}
	for i := 2; i <= n; i++ {
		cfg.SystemID = itoa35w(i)
		c, err := redfish.Connect(power.WithConnectInfo(ctx, power.ConnectInfo{Shared: c1}), cfg)
		require.NoError(t, err)
		cs = append(cs, c)
	}
	for range 3 {
		_, err := cs[0].State(ctx)
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, _ = c.State(rctx)
				cancel()
				if c == cs[0] {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // all polled, all fast
	slow.Store(true)                   // the BMC now asks blades 2..n's controllers: 3 s a read
	time.Sleep(200 * time.Millisecond)
	peak.Store(0)
	peakOpen.Store(0)
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("the BMC's peak of system reads it worked on at once: %d, of those on open connections: %d (MaxInFlight %d)", peak.Load(), peakOpen.Load(), max)
	assert.LessOrEqual(t, int(peakOpen.Load()), max+1, "system reads on open connections a merely slow BMC worked on at once (every read answered in 3 s, one system from cache)")
}
