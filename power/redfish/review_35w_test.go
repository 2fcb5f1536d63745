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

// review35wBMC serves a Redfish service with systems 1..n; slow(id)
// delays a system's reads, dead(id) makes them hang until the client
// gives up. peak is the server's own count of system reads in flight.
type review35wBMC struct {
	srv      *httptest.Server
	roots    *x509.CertPool
	inFlight atomic.Int32
	peak     atomic.Int32
	mu       sync.Mutex
	slow     map[string]time.Duration
	dead     map[string]bool
}

func newReview35wBMC(t *testing.T, n int) *review35wBMC {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", "pw")
	for i := 2; i <= n; i++ {
		b.AddSystem(itoa35w(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	e := &review35wBMC{slow: map[string]time.Duration{}, dead: map[string]bool{}}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			n := e.inFlight.Add(1)
			defer e.inFlight.Add(-1)
			for p := e.peak.Load(); n > p && !e.peak.CompareAndSwap(p, n); p = e.peak.Load() {
			}
			id := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/")
			e.mu.Lock()
			d, dead := e.slow[id], e.dead[id]
			e.mu.Unlock()
			if dead {
				<-r.Context().Done()
				return
			}
			if d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		b.ServeHTTP(w, r)
	}))
	e.srv.StartTLS()
	t.Cleanup(func() { e.srv.CloseClientConnections(); e.srv.Close() })
	e.roots = x509.NewCertPool()
	e.roots.AddCert(e.srv.Certificate())
	return e
}

func (e *review35wBMC) set(id string, slow time.Duration, dead bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.slow[id], e.dead[id] = slow, dead
}

func itoa35w(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// connect35w connects systems 1..n on one session (MaxInFlight max).
func (e *review35wBMC) connect35w(t *testing.T, n, max int) []*redfish.Controller {
	ctx := context.Background()
	cfg := redfish.Config{Endpoint: e.srv.URL, SystemID: "1", Username: "admin", Password: "pw", RootCAs: e.roots, MaxInFlight: max}
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
	return cs
}

// TestReview35w_HealthyBladeSuspectStarvedByDeadBlades: blade 1 is
// healthy; one of its reads once took 400 ms and its caller (a monitor
// with a 300 ms deadline) gave up: the read went overdue (200 ms) and
// was never answered, so blade 1 stays "suspect" and all its later
// reads queue for the one place the suspect systems share, behind the
// dead blades 2..8 whose reads hold that place until their callers'
// 2 s deadlines. Blade 1 answers in milliseconds again, yet its 500 ms
// checks fail (here the first two, until a dead read's deadline frees
// the place at the right moment): a healthy blade's reads wait behind
// dead blades' reads, what the read places were to prevent ("dead blades
// never hold the places of healthy blades' reads", Config.MaxInFlight).
func TestReview35w_HealthyBladeSuspectStarvedByDeadBlades(t *testing.T) {
	const n = 8 // blade 1 healthy, blades 2..8 dead (a chassis with dead neighbours)
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, 1)
	ctx := context.Background()
	for range 3 { // a usual answer time of a few ms
		_, err := cs[0].State(ctx)
		require.NoError(t, err)
	}

	// One slow answer of blade 1's that its caller did not wait for.
	e.set("1", 400*time.Millisecond, false)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := cs[0].State(rctx)
	cancel()
	require.Error(t, err, "the monitor gave up on blade 1's slow read")
	t.Logf("blade 1's slow read: %v", err)
	e.set("1", 0, false) // blade 1 is fast again, for good

	for i := 2; i <= n; i++ {
		e.set(itoa35w(i), 0, true)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(4500 * time.Millisecond) // the dead blades are suspect: their reads now hold the suspect place
	var fails int
	for range 6 {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := cs[0].State(rctx)
		cancel()
		t.Logf("blade 1's read: %v in flight %d", err, e.inFlight.Load())
		if err != nil {
			fails++
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Zero(t, fails, "healthy blade 1's 500 ms reads failed (of 6) while its dead neighbours were polled")
}

// TestSlowBMCLateAnswerKeepsMaxInFlight (review round 23, issue 35, the
// MaxInFlight bound on a merely slow BMC): the BMC, fast while the
// blades were connected, becomes slow (600 ms a read); one read is
// answered late (past the overdue time). The monitor then reads the 12
// blades together: their reads must not go overdue and give their places
// up (the BMC answers, it is slow, no blade is dead), so the BMC sees
// MaxInFlight reads at once, plus the suspect place at most. Before,
// one late answer moved the average by an eighth: the overdue time
// stayed near 300 ms and most reads gave their places up. Ground truth:
// the server's own count of reads in flight.
func TestSlowBMCLateAnswerKeepsMaxInFlight(t *testing.T) {
	const n, max = 12, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	for i := 1; i <= n; i++ {
		e.set(itoa35w(i), 600*time.Millisecond, false)
	}
	ctx := context.Background()
	_, err := cs[0].State(ctx) // one late answer
	require.NoError(t, err)
	e.peak.Store(0)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := c.State(rctx)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	t.Logf("peak reads in flight at the BMC: %d (MaxInFlight %d)", e.peak.Load(), max)
	assert.LessOrEqual(t, e.peak.Load(), int32(max+1), "reads in flight at the BMC past MaxInFlight on a slow BMC that already answered late")
}

// TestReview35w_SlowBMCPassesMaxInFlight: a monitor reads the 12 blades
// of a chassis together, MaxInFlight 2 (the BMC's own limit, as the
// field's doc says: "nor passes the BMC's own limit"). The BMC, fast
// while the blades were connected, now answers each read in 600 ms (an
// iDRAC busy with an inventory job, or one that was slow from the
// start: the session's average is still the connects' few ms). Every
// read goes "overdue" at 200 ms and gives its place up while it is
// still open at the BMC: the BMC sees far more than 2 reads at once.
func TestReview35w_SlowBMCPassesMaxInFlight(t *testing.T) {
	const n, max = 12, 2
	e := newReview35wBMC(t, n)
	cs := e.connect35w(t, n, max)
	for i := 1; i <= n; i++ {
		e.set(itoa35w(i), 600*time.Millisecond, false)
	}
	e.peak.Store(0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := c.State(rctx)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	t.Logf("peak reads in flight at the BMC: %d (MaxInFlight %d)", e.peak.Load(), max)
	// MaxInFlight, plus the suspect systems' one place at most.
	assert.LessOrEqual(t, e.peak.Load(), int32(max+1), "reads in flight at the BMC past MaxInFlight on a merely slow BMC")
}
