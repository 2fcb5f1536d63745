package power_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowBlade delays every GET of one system's resource (a chassis manager
// slow to answer for one blade, as CMMs are) and counts them: the
// emulator's own record of what reached the BMC.
type slowBlade struct {
	h     http.Handler
	path  string
	delay time.Duration

	mu   sync.Mutex
	gets int
}

func (s *slowBlade) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == s.path {
		s.mu.Lock()
		s.gets++
		s.mu.Unlock()
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	s.h.ServeHTTP(w, r)
}

func (s *slowBlade) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// slowChassis: a chassis with blades 1 and 2 behind one Redfish service,
// blade 2's system answered after delay.
func slowChassis(t *testing.T, delay time.Duration) (*redfishtest.BMC, *slowBlade, *httptest.Server, *fake.Power) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", bmcPassword)
	b.AddSystem("2", hw2)
	sb := &slowBlade{h: b, path: "/redfish/v1/Systems/2", delay: delay}
	srv := httptest.NewTLSServer(sb)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return b, sb, srv, hw2
}

// TestReview35_CallerDeadlineDuringJoinRefusesNextCaller (issue 35 point
// 3, for joins): blades 1 and 2 behind one chassis manager, host A
// connected (one session). The manager answers blade 2's system in
// 800 ms. Host B's first caller has a 300 ms deadline of its own (not the
// Pool's CallTimeout, 30 s) and gives up during B's join of A's session.
// Since cbd92b6 attach counts every join that ended without the caller's
// context.Canceled as B's own failure (ownLocked): B is backed off
// (Backoff, 1 s, on a clock standing still here), and the next caller of
// B, whose deadline is ample and whose BMC and credentials work, is
// refused without a try ("not tried: this host's own connection to the
// BMC failed"). The issue (3): "A caller whose context ends during an
// 800 ms login counts as a BMC failure: the next caller is refused for a
// second ... Caller cancellation is not the BMC's fault"; the package doc:
// "A caller that gives up (its context ends) during a login gets a busy
// error at once; ... is not counted against the BMC". A context that
// ends by its deadline is a caller giving up just as a cancel is.
// Ground truth: the chassis emulator's count of GETs of /Systems/2 (the
// second caller's never reached it) and blade 2's own power.
func TestReview35_CallerDeadlineDuringJoinRefusesNextCaller(t *testing.T) {
	_, sb, srv, hw2 := slowChassis(t, 800*time.Millisecond)
	pool := newPool(t, newClock(), power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)

	b := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.State(short) // the caller gives up during the join
	cancel()
	require.Error(t, err)
	before := sb.Gets()

	st, err := b.State(ctx) // the next caller: ample time
	t.Logf("next caller of B: %v, %v; GETs of /Systems/2 at the manager: %d before, %d after", st, err, before, sb.Gets())
	assert.NoError(t, err, "the caller that gave up during the join backed host B off: its next caller was refused without a try")
	assert.Greater(t, sb.Gets(), before, "ground truth: the next caller's join never reached the chassis manager")
	want, _ := hw2.State(ctx)
	assert.Equal(t, want, st)
}

// TestReview35_ShortDeadlineReadsRefuseFenceForMinutes: the same chassis
// (blade 2 answered in 800 ms: slow, working). Host B's state is polled
// by a caller with a 300 ms deadline of its own; each poll gives up
// during the join and, since cbd92b6, counts as B's own failure, doubling
// B's back-off (Backoff 1 s up to MaxBackoff 2 min). After eight polls,
// a fence of B (hard Off, no deadline of its own but CallTimeout's 30 s,
// ample for an 800 ms join) comes 60 s after the last poll and is refused
// without a try: the fence waits two minutes for a host whose BMC and
// credentials work. Ground truth: blade 2's own hardware is still on.
func TestReview35_ShortDeadlineReadsRefuseFenceForMinutes(t *testing.T) {
	_, sb, srv, hw2 := slowChassis(t, 800*time.Millisecond)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)

	b := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	for range 8 {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, _ = b.State(short)
		cancel()
		clk.Advance(3 * time.Minute) // past any back-off: every poll tries the join
	}
	tried := sb.Gets()
	clk.Advance(-3*time.Minute + 60*time.Second) // the fence comes 60 s after the last poll
	err = b.Off(ctx, power.ModeHard)
	t.Logf("fence of B 60 s after the last poll: %v (joins tried by the polls: %d, GETs after: %d)", err, tried, sb.Gets())
	assert.NoError(t, err, "the fence of a host whose BMC and credentials work was refused for its back-off")
	time.Sleep(100 * time.Millisecond)
	assert.False(t, hw2.HardwareOn(), "ground truth: blade 2 is still powered: the fence was never sent")
}

// TestReview35_FailedJoinCostGrowsWithFleet (issue 35 point 4): cbd92b6's
// unjoinLocked puts a session whose join failed back on the Pool's one
// idle list (all BMCs') by walking it from the back past every session
// used more recently: a scan of the fleet's idle sessions under the
// Pool's global lock. A chassis (host A connected, then idle) and N other
// BMCs whose sessions were used after it; each host of a dead blade on
// the chassis that joins A's session (its system fails) walks all N. The
// package doc: "costs the same per call whatever the number of hosts and
// BMCs (per BMC state, maps and an idle list; no scan of the hosts)".
// Measured as in TestPoolCostFlatWithFleetSize (best of seven batches,
// 8× margin for 20× the sessions).
func TestReview35_FailedJoinCostGrowsWithFleet(t *testing.T) {
	const batch = 300
	cost := func(held int) time.Duration {
		clk := newClock()
		f := &fleet{hw: alwaysOn{}}
		pool := power.NewPool(power.PoolConfig{Now: clk.Now})
		defer pool.Close()
		ctx := context.Background()
		chassis := func(ok bool) power.Target {
			return power.Target{BMC: "https://chassis", Config: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
				if power.ConnectInfoFrom(ctx).Shared != nil && !ok {
					return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Message: "the blade does not answer"}
				}
				f.open.Add(1)
				return &sharingFake{Controller: f.hw, logins: &f.logins, open: &f.open}, nil
			}}
		}
		_, err := pool.Controller("a", chassis(true)).State(ctx) // A's session, used first
		require.NoError(t, err)
		clk.Advance(time.Second)
		f.fill(t, pool, held, 1) // the rest of the fleet, used after it
		best := time.Duration(1 << 62)
		next := 0
		for range 7 {
			runtime.GC()
			start := time.Now()
			for range batch {
				_, err := pool.Controller(fmt.Sprintf("dead-%d", next), chassis(false)).State(ctx)
				require.Error(t, err)
				next++
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(1_000), cost(20_000)
	t.Logf("%d failed joins with 1,000 other sessions idle: %s; with 20,000: %s (%.1f×)", batch, small, large, float64(large)/float64(small))
	assert.Less(t, large, 8*small, "the cost of a failed join grows with the fleet's idle sessions (unjoinLocked walks the idle list)")
}

// TestReview35_JoinIgnoringDeadlineBlocksCaller: the Pool's guarantee "No
// call through a Pool's Controller blocks its caller longer than
// CallTimeout (or the caller's deadline) plus half a second". A login
// (Pool.login) runs Connect on its own goroutine and answers the caller at
// its deadline whatever Connect does (a Connect that ignores its deadline
// is given up on and backs off: the overrun timer); a join (Pool.attach)
// runs the same Target.Connect on the caller's goroutine and waits for it
// to return. A host whose Connect, offered the shared session, does not
// return for 3 s (an adapter that ignores its deadline, as the login path
// expects some to) holds its caller 3 s with CallTimeout 300 ms.
func TestReview35_JoinIgnoringDeadlineBlocksCaller(t *testing.T) {
	f := &fleet{hw: alwaysOn{}}
	pool := newPool(t, newClock(), power.PoolConfig{CallTimeout: 300 * time.Millisecond, ConnectTimeout: 300 * time.Millisecond})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	target := power.Target{BMC: "https://chassis", Config: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
		if power.ConnectInfoFrom(ctx).Shared != nil {
			select { // the join's system lookup ignores its deadline
			case <-release:
			case <-time.After(3 * time.Second):
			}
			return nil, &power.Error{Op: "connect", Class: power.ClassBusy, Message: "late", Err: context.DeadlineExceeded}
		}
		f.open.Add(1)
		return &sharingFake{Controller: f.hw, logins: &f.logins, open: &f.open}, nil
	}}
	ctx := context.Background()
	_, err := pool.Controller("a", target).State(ctx)
	require.NoError(t, err)

	start := time.Now()
	_, err = pool.Controller("b", target).State(ctx)
	took := time.Since(start)
	t.Logf("B's call (a join whose Connect ignores its deadline) returned after %s: %v", took, err)
	assert.Error(t, err)
	assert.Less(t, took, 300*time.Millisecond+500*time.Millisecond, "the caller was held past CallTimeout plus half a second")
}
