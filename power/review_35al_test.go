package power_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// wedgedBlade serves b: every GET of system dead's resource hangs (the
// chassis manager's path to that blade is wedged), and every GET of
// system slow's resource is answered after delay (a BMC that takes a
// moment to read a system, as most do).
func wedgedBlade(b *redfishtest.BMC, dead, slow string, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case "/redfish/v1/Systems/" + dead:
				<-r.Context().Done()
				return
			case "/redfish/v1/Systems/" + slow:
				select {
				case <-r.Context().Done():
					return
				case <-time.After(delay):
				}
			}
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35_DeadBladeJoinBlocksNeighbourFence (review round 20, issue
// 35 point 1: "calls on a controller that is already open go through; a
// host's failure never refuses another host whose ... session is open";
// round 19's fix (a): the direct system read has the whole connect
// time). Two blades of one chassis, one login, so one shared session:
// blade 1 (host A, working; the BMC reads it in 200 ms) and blade 2 (host
// H, dead: its reads hang). gofish sends one request at a time on a
// session, and every controller made on the shared session sends through
// the same client. A is fenced (hard Off) on its open session; 50 ms
// later H's monitoring reads H, whose join of the shared session reads
// blade 2 directly. That read queues behind A's state read, takes the
// session's one request slot, and now holds it for the whole
// ConnectTimeout (before round 19: half of it, then the Systems
// collection through the same slot, after which A's reset went out).
// A's reset POST waits behind it until A's deadline (CallTimeout, equal
// to ConnectTimeout as by default) and is never sent: a dead neighbour
// refuses a working host's fence on its open session. With the fault on
// (H retried at its own back-off), every fence of A that overlaps a join
// of H fails the same way. Ground truth: the emulator's reset log and
// A's hardware.
func TestReview35_DeadBladeJoinBlocksNeighbourFence(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(wedgedBlade(b, "2", "1", 200*time.Millisecond))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	h := pool.Controller("h", systemTarget(srv, "2", bmcPassword))
	_, err := a.State(ctx)
	if err != nil {
		t.Fatal(err)
	}

	fence := make(chan error, 1)
	start := time.Now()
	go func() { fence <- a.Off(ctx, power.ModeHard) }()
	time.Sleep(50 * time.Millisecond)
	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	err = <-fence
	took := time.Since(start)
	t.Logf("A's fence after %v: %v; H's read: %v", took.Round(time.Millisecond), err, <-read)
	assert.NoError(t, err, "A's fence on its open session failed behind its dead neighbour's join")
	assert.Contains(t, b.Resets(), "ForceOff", "A's reset was never sent")
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A, fenced, is still powered")
}

// TestReview35_SecondFenceRefusedForAMinute (review round 20, issue 35
// point 1: "A fencing request for A is refused although its credentials
// are right"; round 19's fix (d): a power command's login is held to
// LoginInterval on a budget of its own). Four hosts behind one Redfish
// service, each its own login, the default bound of 2 sessions: A and B
// are monitored (read every 10 s), C and D are working hosts whose
// credentials logged in here before (their sessions were closed when the
// monitored hosts' logins went over the bound). C and D stop answering
// their health checks together (a rack switch, a shared fault) and both
// are fenced, D a second after C. C's fence closes the least recently
// used idle session; D's is refused busy (ErrNotSent) because C's spent
// the BMC's command budget, and every retry of it is refused too, for a
// whole LoginInterval (1 min), while the BMC answers everything at once
// and its hosts' credentials are right. Round 18 sent it. Ground truth:
// the emulator's reset log (D's ForceOff arrives a minute late) and D's
// hardware.
func TestReview35_SecondFenceRefusedForAMinute(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwD := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("4", hwD)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	c := pool.Controller("c", loginTarget(srv, "3", "secret-c/v1"))
	d := pool.Controller("d", loginTarget(srv, "4", "secret-d/v1"))
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	bb := pool.Controller("b", loginTarget(srv, "2", "secret-b/v1"))
	for _, h := range []power.Controller{c, d, a, bb} { // C and D first: proven, then closed for A's and B's
		_, err := h.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	for range 12 { // two minutes of monitoring: any eviction budget is renewed
		for _, h := range []power.Controller{a, bb} {
			_, err := h.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(10 * time.Second)
		power.Sweep(pool)
	}

	if err := c.Off(ctx, power.ModeHard); err != nil {
		t.Fatalf("C's fence: %v", err)
	}
	clk.Advance(time.Second)
	first := clk.Now()
	var sentAfter time.Duration = -1
	for try := 0; try < 8; try++ {
		err := d.Off(ctx, power.ModeHard)
		t.Logf("D's fence at +%v: %v", clk.Now().Sub(first), err)
		if err == nil {
			sentAfter = clk.Now().Sub(first)
			break
		}
		clk.Advance(10 * time.Second)
		for _, h := range []power.Controller{a, bb} {
			_, _ = h.State(ctx)
		}
	}
	s, _ := hwD.State(ctx)
	t.Logf("resets: %v; D's fence sent %v after its first try; D %s", b.Resets(), sentAfter, s)
	assert.Equal(t, time.Duration(0), sentAfter, "the fence of D, whose credentials are right, was refused because C was fenced a second earlier")
}

// TestReview35_DeadBladeLoginBlocksNeighbourFence (review round 20, issue
// 35 point 1; round 19's fix (a)): the same chassis, but host H (the dead
// blade 1, whose reads hang) and host C (blade 2, working; the BMC reads
// it in 100 ms) have logins of their own. Logins are one at a time per
// BMC, and a Connect holds the BMC's login turn until its system is
// found: H's try now holds it for the whole ConnectTimeout (its direct
// read hangs to the end; before round 19 half of it, then the Systems
// collection). C, whose session was closed (or never opened), is fenced
// 50 ms after H's try began: its login waits for H's turn to end, and is
// left 50 ms of its CallTimeout (equal to ConnectTimeout, as by default)
// for a login, its system's read and the reset: the fence fails, never
// sent. H, missing, retries once a login interval, each time holding the
// BMC's logins for ConnectTimeout: fences of its neighbours that need a
// login fail or wait that long, for as long as the blade is dead.
// Ground truth: the emulator's reset log and C's hardware.
func TestReview35_DeadBladeLoginBlocksNeighbourFence(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(wedgedBlade(b, "1", "2", 100*time.Millisecond))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	h := pool.Controller("h", loginTarget(srv, "1", "secret-h/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))

	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	time.Sleep(50 * time.Millisecond)
	err := c.Off(ctx, power.ModeHard)
	t.Logf("C's fence: %v; H's read: %v", err, <-read)
	assert.NoError(t, err, "C's fence failed behind its dead neighbour's login")
	assert.Contains(t, b.Resets(), "ForceOff", "C's reset was never sent")
	s, _ := hwC.State(ctx)
	assert.Equal(t, power.StateOff, s, "host C, fenced, is still powered")
}

// TestReview35_WedgedBladeStarvesSharedSession (review round 20, issue 35
// points 1 and 2: sessions shared per endpoint and login, and "calls on a
// controller that is already open go through; a host's failure never
// refuses another host whose session is open"). Two blades of one
// chassis, one login, so one shared session; both connected. Then blade
// 2 (host H) wedges: the chassis manager's reads of it hang. H stays
// monitored (a read every 200 ms; each now takes the whole CallTimeout).
// gofish sends one request at a time per session and every controller on
// the shared session sends through the same client, so H's hanging reads
// hold the session's one request slot back to back: host A (blade 1,
// working; its reads take 200 ms) is fenced three times in a row, on its
// open session, and each fence's state read waits behind one hanging
// read of H and its reset behind the next: never sent, for as long as
// the blade is wedged. The faults stay on. Ground truth: the emulator's
// reset log and A's hardware.
func TestReview35_WedgedBladeStarvesSharedSession(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var wedged atomic.Bool
	handler := wedgedBlade(b, "never", "1", 200*time.Millisecond)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wedged.Load() && r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/2" {
			<-r.Context().Done()
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	h := pool.Controller("h", systemTarget(srv, "2", bmcPassword))
	for _, c := range []power.Controller{a, h} {
		if _, err := c.State(ctx); err != nil {
			t.Fatal(err)
		}
	}
	require.Equal(t, 1, b.Logins(), "one shared session")

	wedged.Store(true)
	stop := make(chan struct{})
	monitored := make(chan struct{})
	go func() { // H's monitoring
		defer close(monitored)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = h.State(ctx)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	var err error
	for try := 0; try < 3; try++ {
		if err = a.Off(ctx, power.ModeHard); err == nil {
			break
		}
		t.Logf("A's fence, try %d: %v", try, err)
	}
	close(stop)
	<-monitored
	assert.NoError(t, err, "A's fence on its open session never went through while its neighbour blade hangs")
	assert.Contains(t, b.Resets(), "ForceOff", "A's reset was never sent")
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A, fenced three times, is still powered")
}

// TestReview35_OverBoundBesideJoinNotInGuarantees (review round 20, the
// package documentation's Guarantees: "A BMC never has more than
// MaxSessions sessions open through the Pool, but for one more while a
// login of credentials not yet proven there, or the retry of a host whose
// system failed, runs and until its outcome has a session logged out").
// Round 19's fix (b) adds a third case the Guarantees do not list: the
// layout of TestReview35_NeighbourReadCancelsFenceJoin (A's session and
// the kept session K of login k fill the bound of 2; host D of login k,
// whose system the BMC reads in 1.5 s, is fenced and joins K; host E,
// proven here, is read with a 2 s deadline): E's login retires K and
// logs in one over the bound, and K stays logged in for D's join and
// fence. No login of unproven credentials and no retry of a failing
// system runs, yet the BMC holds three sessions (it may hold them for
// ConnectTimeout and then CallTimeout more: the join, then the call it
// serves). Ground truth: the emulator's open sessions, sampled.
func TestReview35_OverBoundBesideJoinNotInGuarantees(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(slowSystem(b, "2", 1500*time.Millisecond))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	e := pool.Controller("e", loginTarget(srv, "3", "secret-e/v1"))
	kt := func(id string) power.Target {
		t := loginTarget(srv, id, "sys="+id)
		t.Login = "secret-k/v1"
		return t
	}
	m := pool.Controller("m", kt("9"))
	d := pool.Controller("d", kt("2"))
	_, err := e.State(ctx)
	require.NoError(t, err)
	clk.Advance(4 * time.Minute)
	_, err = a.State(ctx)
	require.NoError(t, err)
	clk.Advance(61 * time.Second)
	power.Sweep(pool)
	_, err = m.State(ctx)
	require.Error(t, err)
	require.Eventually(t, func() bool { return b.Sessions() == 2 }, 5*time.Second, 10*time.Millisecond)

	most := 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			most = max(most, b.Sessions())
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	fence := make(chan error, 1)
	go func() { fence <- d.Off(ctx, power.ModeHard) }()
	time.Sleep(200 * time.Millisecond)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, rerr := e.State(rctx)
	cancel()
	err = <-fence
	close(stop)
	<-sampled
	t.Logf("E's read: %v; D's fence: %v; most sessions open at once: %d", rerr, err, most)
	assert.LessOrEqual(t, most, 2, "the BMC held more than MaxSessions sessions while no unproven login and no failing system's retry ran")
}

// TestReview35_UnsentPressBlocksPressesForMinutes (review round 20, the
// consequence of TestReview35_DeadBladeJoinBlocksNeighbourFence for a
// press-only power-off; the redfish package documentation: a press is
// held back after "a POST that got no HTTP answer, which the BMC may
// still apply"). The chassis lists no GracefulShutdown (older firmware):
// a soft power-off of host A is a PushPowerButton. A's soft Off, on its
// open shared session, queues its POST behind the dead blade H's join
// (one request at a time per session) and runs out of time before the
// request is ever written: the adapter records it as a reset whose answer
// was lost, and holds every press of A back for LostLanding + SoftTimeout
// + StaleReads (6.5 min by default). Once H's join is over (the fault
// gone), a minute later (past StaleReads), A's soft Off is retried:
// refused, not sent, although no press ever reached the BMC. Ground
// truth: the emulator's reset log.
func TestReview35_UnsentPressBlocksPressesForMinutes(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", bmcPassword)
	b.Quirks.NoGraceful = true
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(wedgedBlade(b, "2", "1", 200*time.Millisecond))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: time.Second})
	ctx := context.Background()
	adapterClock := &manualClock{t: time.Now()} // the adapter's (Config.Now), moved past StaleReads below
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	target := func(id string) power.Target {
		return power.Target{BMC: srv.URL, Config: "admin/" + bmcPassword, Connect: func(ctx context.Context) (power.Controller, error) {
			return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword,
				RootCAs: roots, Now: adapterClock.Now})
		}}
	}
	a := pool.Controller("a", target("1"))
	h := pool.Controller("h", target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.True(t, a.(interface{ TogglesOff(power.Mode) bool }).TogglesOff(power.ModeSoft), "a soft power-off is a press here")

	first := make(chan error, 1)
	go func() { first <- a.Off(ctx, power.ModeSoft) }()
	time.Sleep(50 * time.Millisecond)
	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	err1 := <-first
	<-read           // H's join is over
	if err1 == nil { // the press went out despite the neighbour: nothing held back
		assert.Equal(t, []string{"PushPowerButton"}, b.Resets())
		return
	}
	require.Empty(t, b.Resets(), "no press reached the BMC")
	adapterClock.Advance(time.Minute) // past StaleReads (30 s) of the attempt
	err = a.Off(ctx, power.ModeSoft)
	t.Logf("first soft Off: %v; retried a minute later (adapter's clock), the neighbour's join over: %v; resets: %v", err1, err, b.Resets())
	assert.NoError(t, err, "A's press, never sent, holds every later press of A back")
	assert.Equal(t, []string{"PushPowerButton"}, b.Resets())
}

// TestReview35_RepairedBladeStarvedByDeadNeighbours (review round 20,
// issue 35 point 1: "a host's failure never refuses another host whose
// credentials differ"; the package documentation: a host whose system
// failed on its last tries retries "at most one such host's login per
// BMC per LoginInterval ... (with many such hosts on one BMC, each waits
// its turn among their retries)"). One chassis, each blade its own
// login, the default bound of 2 held by working hosts A and B (read
// every second, as the executor's jobs do). Three blades are dead (their
// systems gone: RMA, renumbered) and stay in the inventory, read every
// second too. Blade H's system was missing on its first tries, then is
// back (reseated) and H is fenced, every 10 s. There is no turn: the one
// retry a minute goes to whichever such host calls first once the minute
// is over, and the dead blades, polled every second and refused without
// a try (so their own back-off does not grow), always come first. H,
// whose system and credentials work, is refused busy for as long as its
// dead neighbours are polled: 10 minutes here (the test's end). Ground
// truth: the emulator's reset log and H's hardware.
func TestReview35_RepairedBladeStarvedByDeadNeighbours(t *testing.T) {
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
	for sec := 0; sec < 15*60 && fenced < 0; sec++ {
		el := clk.Now().Sub(start)
		for _, c := range monitored {
			_, _ = c.State(ctx)
		}
		switch {
		case el < repairAt && sec%10 == 0:
			_, _ = h.State(ctx) // H's system is missing: its tries fail
		case el == repairAt:
			b.AddSystem("5", hwH) // reseated
		case el > repairAt && sec%10 == 0:
			if err := h.Off(ctx, power.ModeHard); err == nil {
				fenced = el - repairAt
			} else if sec%120 == 0 {
				t.Logf("H's fence %v after the repair: %v", el-repairAt, err)
			}
		}
		clk.Advance(time.Second)
		if sec%5 == 0 {
			power.Sweep(pool)
		}
	}
	s, _ := hwH.State(ctx)
	t.Logf("H fenced %v after its repair (-1: never); H %s; resets %v; logins %d", fenced, s, b.Resets(), b.Logins())
	assert.True(t, fenced >= 0 && fenced <= 5*time.Minute, "H, repaired, is refused for as long as its dead neighbours are polled")
	assert.Equal(t, power.StateOff, s, "host H, fenced every 10 s for 10 minutes, is still powered")
}
