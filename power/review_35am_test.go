package power_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
)

// chassisAtBound sets up n systems behind one Redfish service, each host
// its own login, the default bound of 2 sessions: the first n-2 hosts
// logged in here before (proven) and their sessions were closed for the
// last two, which are monitored (read every 10 s) for two minutes, so no
// eviction is recent. It returns the BMC, the clock, the pool, the hosts
// (the closed ones first) and their hardware.
func chassisAtBound(t *testing.T, n int) (*redfishtest.BMC, *manualClock, []power.Controller, []*fake.Power) {
	t.Helper()
	clk := newClock()
	hw := []*fake.Power{fake.NewPower(time.Now, fake.PowerConfig{})}
	b := redfishtest.NewBMC(clk.Now, hw[0], "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		p := fake.NewPower(time.Now, fake.PowerConfig{})
		hw = append(hw, p)
		b.AddSystem(fmt.Sprint(i), p)
	}
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var hosts []power.Controller
	for i := 1; i <= n; i++ {
		hosts = append(hosts, pool.Controller(fmt.Sprintf("h%d", i), loginTarget(srv, fmt.Sprint(i), fmt.Sprintf("secret-%d/v1", i))))
	}
	for _, h := range hosts {
		if _, err := h.State(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	mon := hosts[n-2:]
	for range 12 {
		for _, h := range mon {
			if _, err := h.State(ctx); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(10 * time.Second)
		power.Sweep(pool)
	}
	return b, clk, hosts, hw
}

// TestReview35_ReadSpendsFenceBudget (review round 21, issue 35 point 1;
// round 20's fix: "reads never spend a fence's place ... two hosts fenced
// together both go out at once", power/pool_session.go evictLocked doc).
// Five hosts behind one service, each its own login, the default bound of
// 2: C, D and E logged in before (proven), A and B are monitored. E is
// read once (a health check: its login closes one idle session, the
// read's one eviction per LoginInterval). A second later C and D stop
// answering together and are both fenced. C's fence closes a session (the
// second eviction of the interval); D's is refused busy, never sent: the
// read spent the place the documentation promises the second fence.
// Ground truth: the emulator's reset log and D's hardware.
func TestReview35_ReadSpendsFenceBudget(t *testing.T) {
	b, clk, hosts, hw := chassisAtBound(t, 5)
	ctx := context.Background()
	c, d, e := hosts[0], hosts[1], hosts[2]
	if _, err := e.State(ctx); err != nil {
		t.Fatalf("E's read: %v", err)
	}
	clk.Advance(time.Second)
	if err := c.Off(ctx, power.ModeHard); err != nil {
		t.Fatalf("C's fence: %v", err)
	}
	clk.Advance(time.Second)
	err := d.Off(ctx, power.ModeHard)
	s, _ := hw[1].State(ctx)
	t.Logf("D's fence: %v; resets %v; D %s", err, b.Resets(), s)
	assert.NoError(t, err, "D's fence (credentials right, BMC answering) refused: a neighbour's read spent the second fence's place")
	assert.Equal(t, power.StateOff, s, "host D, fenced, is still powered")
}

// TestReview35_ThirdFenceRefusedForAMinute (review round 21, issue 35
// point 1: "A fencing request for A is refused although its credentials
// are right"; round 20's fix allows two command evictions per BMC per
// LoginInterval). A chassis of six blades, each its own login, the
// default bound of 2: four blades' sessions were closed for the two
// monitored ones. A rack switch fails and the four are fenced together,
// a second apart. The first two go out; the third is refused busy
// (ErrNotSent), and so is every retry until LoginInterval has passed
// since the first: a fence of a host whose credentials are right and
// whose BMC answers everything at once waits a minute, while the fenced
// host may still write to shared storage. Ground truth: the emulator's
// reset log and the third host's hardware.
func TestReview35_ThirdFenceRefusedForAMinute(t *testing.T) {
	b, clk, hosts, hw := chassisAtBound(t, 6)
	ctx := context.Background()
	var errs []error
	for i := 0; i < 3; i++ {
		errs = append(errs, hosts[i].Off(ctx, power.ModeHard))
		clk.Advance(time.Second)
	}
	s, _ := hw[2].State(ctx)
	t.Logf("fences: %v; resets %v; third host %s", errs, b.Resets(), s)
	for i, err := range errs {
		assert.NoError(t, err, "fence %d of a host whose credentials are right refused", i+1)
	}
	assert.Equal(t, power.StateOff, s, "the third fenced host is still powered")
}

// TestReview35_SharedSessionFansOutUnbounded (review round 21, issue 35
// point 2 "share one session per endpoint ... across the systems it
// serves"; round 20's change: each Controller sends on its own request
// path on the shared session, power/redfish/path.go). A chassis manager
// serving 16 blades with one login: the hosts are read together every
// poll (as a monitor that reads its fleet in parallel does), the BMC
// taking 50 ms per answer. gofish sent one request at a time per session
// (one connection); now every blade's read goes out at once, on a
// connection of its own: nothing caps the requests in flight per BMC
// (bmcweb refuses connections past its limit; other fleet tools cap them
// at 4 per BMC), and the session's transport keeps 2 idle connections
// (net/http's default MaxIdleConnsPerHost), so every poll after the first
// opens 14 new TLS connections to the BMC: a handshake storm on a slow
// BMC CPU for every round of reads, in steady state. Ground truth: the
// test server's own connection and in-flight counts.
func TestReview35_SharedSessionFansOutUnbounded(t *testing.T) {
	const n = 16
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		b.AddSystem(fmt.Sprint(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	var inflight, maxInflight, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := maxInflight.Load()
			if cur <= m || maxInflight.CompareAndSwap(m, cur) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		b.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, newClock(), power.PoolConfig{})
	ctx := context.Background()
	var hosts []power.Controller
	for i := 1; i <= n; i++ {
		hosts = append(hosts, pool.Controller(fmt.Sprintf("h%d", i), systemTarget(srv, fmt.Sprint(i), bmcPassword)))
	}
	round := func() {
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.State(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	round() // logins and joins
	maxInflight.Store(0)
	before := conns.Load()
	const rounds = 5
	for range rounds {
		round()
	}
	opened := conns.Load() - before
	t.Logf("steady state: %d new connections in %d rounds of %d reads; at most %d requests in flight at the BMC", opened, rounds, n, maxInflight.Load())
	assert.LessOrEqual(t, opened, int64(rounds), "steady-state reads on one shared session open new TLS connections to the BMC every round")
	assert.LessOrEqual(t, maxInflight.Load(), int64(4), "requests in flight to one BMC on one session are not capped")
}

// TestReview35_BasicAuthDeadBladeHoldsLoginTurn (review round 21, issue
// 35 point 1; round 20's fix: ConnectInfo.LoggedIn hands the BMC's login
// turn on once a login is accepted, so that a dead blade's system read
// never holds a neighbour's login). With BasicAuth the adapter never
// calls LoggedIn (power/redfish/redfish.go connect: "!c.cfg.BasicAuth"),
// yet the Pool still gives such a connect the BMC's one login turn
// (ep.logging, pool_login.go): host H (the dead blade 1, whose reads
// hang) and host C (blade 2, working, answered in 100 ms) of a
// basic-auth chassis, each its own credentials. C is fenced 50 ms after
// H's connect began: C's connect waits for H's whole ConnectTimeout and
// the fence fails, never sent: the same starvation round 20 fixed for
// session logins, still on for basic auth (which opens no session and
// needs no login turn at all). Ground truth: the emulator's reset log and
// C's hardware.
func TestReview35_BasicAuthDeadBladeHoldsLoginTurn(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(wedgedBlade(b, "1", "2", 100*time.Millisecond))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	ht := basicTarget(srv, "1", bmcPassword)
	ht.Config, ht.Login = "basic-h/v1", "basic-h/v1"
	ct := basicTarget(srv, "2", bmcPassword)
	ct.Config, ct.Login = "basic-c/v1", "basic-c/v1"
	h := pool.Controller("h", ht)
	c := pool.Controller("c", ct)

	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	time.Sleep(50 * time.Millisecond)
	err := c.Off(ctx, power.ModeHard)
	t.Logf("C's fence: %v; H's read: %v", err, <-read)
	assert.NoError(t, err, "C's fence failed behind its dead neighbour's basic-auth connect")
	assert.Contains(t, b.Resets(), "ForceOff", "C's reset was never sent")
	s, _ := hwC.State(ctx)
	assert.Equal(t, power.StateOff, s, "host C, fenced, is still powered")
}

// TestReview35_BasicAuthDeadBladeBacksOffNeighbours (review round 21,
// issue 35 point 1: "One host's ... failure blocks its neighbours": back
// off logins, not hosts). A chassis whose blades share one basic-auth
// account (one Login, as a chassis manager's single service account is):
// blade 1 is dead (its system reads hang), blade 2 works. With BasicAuth
// the BMC "accepts" the login without a session (the service root), so
// the dead blade's timed-out system read is the host's own failure, not
// its credentials'; yet the Pool counts it as a failed login of the
// shared credentials and backs them off: host C (blade 2), which has no
// controller yet (a new host, a restart, churn), is refused its fence
// while the BMC and its credentials work, for as long as the dead blade
// keeps failing. Ground truth: the emulator's reset log and C's
// hardware.
func TestReview35_BasicAuthDeadBladeBacksOffNeighbours(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(wedgedBlade(b, "1", "", 0))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 300 * time.Millisecond, CallTimeout: 2 * time.Second})
	ctx := context.Background()
	h := pool.Controller("h", basicTarget(srv, "1", bmcPassword))
	c := pool.Controller("c", basicTarget(srv, "2", bmcPassword))
	for i := range 4 { // the monitor reads the dead blade every 10 s
		if i > 0 {
			clk.Advance(10 * time.Second)
		}
		_, err := h.State(ctx)
		t.Logf("H: %v", err)
	}
	clk.Advance(2 * time.Second)
	err := c.Off(ctx, power.ModeHard)
	t.Logf("C's fence: %v", err)
	assert.NoError(t, err, "C's fence (the BMC and the shared credentials work) refused because its dead neighbour's system read failed")
	assert.Contains(t, b.Resets(), "ForceOff", "C's reset was never sent")
	s, _ := hwC.State(ctx)
	assert.Equal(t, power.StateOff, s, "host C, fenced, is still powered")
}

// TestReview35_RepairedBladePolledSlowlyStarves (review round 21, issue 35
// point 1; round 20's fix: the retry turn of hosts whose system failed
// goes to the one that had it longest ago, power/pool_turn.go). The same
// chassis as TestReview35_RepairedBladeStarvedByDeadNeighbours, but the
// repaired blade H is tried every 2 minutes (a health check's period,
// an operator's retry), longer than LoginInterval. Its ask holds the turn
// back for a LoginInterval (nobody else takes it), then is dropped ("a
// host that asked no more for LoginInterval no longer waits"); the dead
// blades, polled every second, take the turn as soon as H's ask is
// dropped, so it is never over when H asks again: H, whose system and
// credentials work, is refused busy for as long as its dead neighbours
// are polled (20 minutes here, the test's end). Ground truth: the
// emulator's reset log and H's hardware.
func TestReview35_RepairedBladePolledSlowlyStarves(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	monitored := []power.Controller{
		pool.Controller("a", loginTarget(srv, "1", "secret-a/v1")),
		pool.Controller("b", loginTarget(srv, "2", "secret-b/v1")),
	}
	for i := range 3 { // dead blades
		monitored = append(monitored, pool.Controller("dead-"+strconv.Itoa(i), loginTarget(srv, strconv.Itoa(7+i), "secret-dead-"+strconv.Itoa(i)+"/v1")))
	}
	h := pool.Controller("h", loginTarget(srv, "5", "secret-h/v1"))
	hwH := fake.NewPower(time.Now, fake.PowerConfig{})
	start := clk.Now()
	repairAt := 5 * time.Minute
	var fenced time.Duration = -1
	tries := 0
	for sec := 0; sec < 25*60 && fenced < 0; sec++ {
		el := clk.Now().Sub(start)
		for _, c := range monitored {
			_, _ = c.State(ctx)
		}
		switch {
		case el < repairAt && sec%10 == 0:
			_, _ = h.State(ctx) // H's system is missing: its tries fail
		case el == repairAt:
			b.AddSystem("5", hwH) // reseated
		case el > repairAt && sec%120 == 7:
			tries++
			if err := h.Off(ctx, power.ModeHard); err == nil {
				fenced = el - repairAt
			} else if tries <= 2 {
				t.Logf("H's fence %v after the repair: %v", el-repairAt, err)
			}
		}
		clk.Advance(time.Second)
		if sec%5 == 0 {
			power.Sweep(pool)
		}
	}
	s, _ := hwH.State(ctx)
	t.Logf("H fenced %v after its repair (-1: never, %d tries); H %s; resets %v; logins %d", fenced, tries, s, b.Resets(), b.Logins())
	assert.True(t, fenced >= 0 && fenced <= 5*time.Minute, "H, repaired and tried every 2 minutes, is refused for as long as its dead neighbours are polled")
	assert.Equal(t, power.StateOff, s, "host H, fenced every 2 minutes for 20 minutes, is still powered")
}

// TestReview35_SameLoginWaitsForDeadBladesJoin (review round 21, issue
// 35 point 1: "a host's failure never refuses another host whose ...
// session is open"; round 20's fix: ConnectInfo.LoggedIn hands the BMC's
// login turn on once accepted, "same-credential logins still wait",
// cr.connecting in pool_login.go). One chassis account for all blades
// (one login, so one shared session): nothing is open yet (a restart).
// The monitor reads the dead blade H first (its system read hangs); its
// login is accepted at once, and its Connect then reads blade 1 for the
// whole ConnectTimeout. Blade C (working) is fenced 50 ms later: it needs
// the session H's login opened, and waits for H's Connect to return
// (cr.connecting) instead of using the accepted session (or logging in
// beside it): left 50 ms of its CallTimeout, the fence fails, never sent.
// With the fault on, every retry of H overlaps the fences of its
// neighbours that need the session the same way. Ground truth: the
// emulator's reset log and C's hardware.
func TestReview35_SameLoginWaitsForDeadBladesJoin(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(wedgedBlade(b, "1", "2", 100*time.Millisecond))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	h := pool.Controller("h", systemTarget(srv, "1", bmcPassword))
	c := pool.Controller("c", systemTarget(srv, "2", bmcPassword))

	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	time.Sleep(50 * time.Millisecond)
	err := c.Off(ctx, power.ModeHard)
	t.Logf("C's fence: %v; H's read: %v; logins %d", err, <-read, b.Logins())
	assert.NoError(t, err, "C's fence failed behind its dead neighbour's connect on the same credentials")
	assert.Contains(t, b.Resets(), "ForceOff", "C's reset was never sent")
	s, _ := hwC.State(ctx)
	assert.Equal(t, power.StateOff, s, "host C, fenced, is still powered")
}
