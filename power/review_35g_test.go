package power_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_HungJoinNeverBacksOff: two blades behind one chassis
// manager, one session login, host A connected. The manager's path to
// blade 2 is wedged: every GET of /Systems/2 hangs. Host H (blade 2) is
// being remediated and its caller reads its state again and again. Each
// call joins A's shared session (Pool.attach), whose Connect is bounded
// by the caller's context and ConnectTimeout; with the Pool's defaults
// CallTimeout equals ConnectTimeout (30 s each; here 300 ms each), so the
// join always ends with the caller's (the Pool's own CallTimeout)
// deadline first, and since 722e8d6 attach counts a failed join against
// the host only when ctx.Err() == nil: a join that times out is never
// backed off. The package doc (and 722e8d6's comment: "Any other failure
// (a system not found or failing, a lookup that timed out) backs this
// host alone off"): "backs that host alone off, Backoff doubling up to
// MaxBackoff, as does any other failure of a host joining a shared
// session". On a clock that stands still, Backoff (1 s) allows one try.
// Ground truth: the manager's own count of hung GETs of /Systems/2 (each
// holds a request on the manager that serves the healthy blades for the
// full timeout).
func TestReview35_HungJoinNeverBacksOff(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var mu sync.Mutex
	hung := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems/2" {
			mu.Lock()
			hung++
			mu.Unlock()
			<-r.Context().Done() // the blade never answers
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	// The defaults' relation: CallTimeout == ConnectTimeout.
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: 300 * time.Millisecond, CallTimeout: 300 * time.Millisecond})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)

	h := pool.Controller("h", systemTarget(srv, "2", bmcPassword))
	for range 5 {
		_, err := h.State(ctx)
		require.Error(t, err)
	}
	mu.Lock()
	n := hung
	mu.Unlock()
	t.Logf("hung GETs of /Systems/2 at the manager: %d for 5 calls on a clock that stands still", n)
	assert.LessOrEqual(t, n, 1, "ground truth: a join that timed out was tried again at every call, never backed off")
}

// TestReview35_FailedJoinErasesNeighbourCall: two blades, one session
// login, host A connected at t0 (IdleTimeout 5 min). At t0+4 min host A
// reads its state on the shared session (the BMC is slow to answer it)
// and host B joins meanwhile; blade 2's lookup fails (500). A's call
// ends first, then B's join (power/redfish's requests on one session run
// one at a time). Since 722e8d6 a failed join sets the session's
// lastUsed back to what it was when the join started (t0) if no call is
// running when it ends: host A's successful call, which ended during the
// join, is erased. At t0+6 min, 2 min after A's last call, the janitor
// closes the session as idle for 5 min, and A's next call logs in again.
// The package doc: "closes a session when no call used it for
// PoolConfig.IdleTimeout". Ground truth: the emulator's login count.
func TestReview35_FailedJoinErasesNeighbourCall(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var armed atomic.Bool
	startedA := make(chan struct{}, 1)
	releaseA := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(releaseA) }) }
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		if r.Method == http.MethodGet && path == "/redfish/v1/Systems/1" && armed.Load() {
			select {
			case startedA <- struct{}{}:
			default:
			}
			<-releaseA // the BMC is slow to answer A's read
		}
		if r.Method == http.MethodGet && path == "/redfish/v1/Systems/2" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"code":"Base.1.8.InternalError","message":"the blade does not answer"}}`)
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(free)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Logins())

	clk.Advance(4 * time.Minute)
	armed.Store(true)
	doneA := make(chan error, 1)
	go func() { _, err := a.State(ctx); doneA <- err }() // t0+4 min: A uses the shared session
	<-startedA
	hostB := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	doneB := make(chan error, 1)
	go func() { _, err := hostB.State(ctx); doneB <- err }()
	time.Sleep(300 * time.Millisecond) // B's join has started (it waits for A's request)
	armed.Store(false)
	free()
	require.NoError(t, <-doneA)
	require.Error(t, <-doneB)

	clk.Advance(2 * time.Minute)        // t0+6 min: A's last call was 2 min ago
	time.Sleep(1500 * time.Millisecond) // the janitor sweeps (every second)
	_, err = a.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, b.Logins(), "ground truth: A's session was closed as idle 2 min after A's call on it, and A logged in again")
}

// TestReview35_FailedJoinsKeepIdleSessionBehindAnotherBMC: 722e8d6 means
// "a failed join does not keep the session from idling out" by setting
// the session's lastUsed back after the join; but doneLocked has already
// put the session at the back of the Pool's idle list, which sweep reads
// as being in order of last use ("only those (the idle list is in order
// of last use)"): it stops at the first session not idle long enough. In
// a Pool that serves a second BMC whose host is read every 2 min, the
// chassis's shared session (host A, idle since t0) sits behind that
// BMC's fresher session after each failed join of blade 2 (dead, 500),
// and is never closed: the stale session the round-6 fix meant to let go
// stays open for ever, as before. Ground truth: the chassis emulator's
// open sessions.
func TestReview35_FailedJoinsKeepIdleSessionBehindAnotherBMC(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b1 := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b1.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	d := &deadBlade{h: b1, path: "/redfish/v1/Systems/2"}
	srv1 := httptest.NewTLSServer(d)
	t.Cleanup(srv1.Close)
	_, srv2, _ := redfishBMC(t)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv1, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err) // t0; A has nothing more to do
	c := pool.Controller("c", redfishTarget(srv2, bmcPassword))
	hostB := pool.Controller("b", systemTarget(srv1, "2", bmcPassword))

	start := clk.Now()
	closedAt := time.Duration(-1)
	for k := 1; k <= 6 && closedAt < 0; k++ { // 12 minutes
		clk.Advance(2*time.Minute - 10*time.Second)
		_, err := c.State(ctx) // the other BMC's host, read every 2 min
		require.NoError(t, err)
		clk.Advance(10 * time.Second)
		_, _ = hostB.State(ctx)             // blade 2's failed join
		time.Sleep(1200 * time.Millisecond) // the janitor sweeps
		if b1.Sessions() == 0 {
			closedAt = clk.Now().Sub(start)
		}
	}
	t.Logf("chassis session of idle host A closed after %v (-1: never)", closedAt)
	assert.True(t, closedAt >= 0 && closedAt <= 6*time.Minute,
		"ground truth: host A's session, unused since t0, is still open at the chassis after 12 minutes (IdleTimeout 5 min)")
}
