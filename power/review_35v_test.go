package power_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// deadBladeHangsCollection serves b with blade dead's reads hanging, and
// the Systems collection hanging as well while that blade is dead (a
// chassis manager that builds its collection by asking every blade).
func deadBladeHangsCollection(b *redfishtest.BMC, dead string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case "/redfish/v1/Systems/" + dead, "/redfish/v1/Systems", "/redfish/v1/Systems/":
				<-r.Context().Done()
				return
			}
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35v_EarlySharedLoginFailureRefusesOpenJoiner (review round 22,
// issue 35 point 1: "calls on a controller that is already open go
// through; a host's failure never refuses another host whose ... session
// is open"; round 21's fix: a login's session is shared as soon as the
// BMC accepts it, pool_join.go publishEarlyLocked). One chassis account
// for blades 1 (H, dead: its reads hang, and so does the Systems
// collection while it is dead) and 2 (C, working). H's monitoring logs in;
// the BMC accepts the login, the session is shared early, and C joins it:
// C's calls work on it (its state read and a soft Off). H's Connect then
// runs out of time on its system and the collection (the service's, by
// the adapter's rule): settleEarlyLocked backs the shared login off and
// retires the session C uses, clearing C's controller. C's next call (a
// fence), on credentials the BMC accepts and a system that answers, is
// refused ErrBackoff, never sent. Ground truth: the emulator's reset log
// and C's hardware.
func TestReview35v_EarlySharedLoginFailureRefusesOpenJoiner(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(deadBladeHangsCollection(b, "1"))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 2 * time.Second})
	ctx := context.Background()
	h := pool.Controller("h", systemTarget(srv, "1", bmcPassword))
	c := pool.Controller("c", systemTarget(srv, "2", bmcPassword))

	read := make(chan error, 1)
	go func() { _, err := h.State(ctx); read <- err }()
	time.Sleep(150 * time.Millisecond)
	s, err := c.State(ctx)
	require.NoError(t, err, "C's read on the early-shared session")
	require.Equal(t, power.StateOn, s)
	herr := <-read
	t.Logf("H's read: %v; logins %d", herr, b.Logins())
	require.Error(t, herr)

	err = c.Off(ctx, power.ModeHard)
	st, _ := hwC.State(ctx)
	t.Logf("C's fence after H's login failed: %v; resets %v; C %s; logins %d", err, b.Resets(), st, b.Logins())
	assert.NoError(t, err, "C's fence (open session, credentials right, system answering) refused after its dead neighbour's login failed")
	assert.Equal(t, power.StateOff, st, "host C, fenced, is still powered")
}

// TestReview35v_DeadBladeBacksOffNeighbourFenceMinutes (review round 22,
// issue 35 point 1: "a host's failure never refuses another host whose
// credentials differ or whose session is open"; round 21 made a dead
// blade's timed-out read the host's own only with basic auth, when the
// collection answered). One chassis account for blades 1 (H, dead: its
// read hangs, and so does the Systems collection while it is dead, as on
// a chassis manager that asks every blade to build it) and 2 (C, working:
// its own resource answers at once, so a login of C's works). H is
// polled; C is not (a host touched only when it is remediated). Every
// try of H is a login the BMC accepts whose Connect then runs out of time
// on the collection: the adapter calls that the login's failure, and the
// Pool backs the shared login off, doubling with nothing in between to
// end it, up to MaxBackoff (2 min). C is then fenced: its credentials are
// right, the BMC answers C's system, yet the fence is refused ErrBackoff,
// never sent, and still a minute later. Ground truth: the emulator's
// reset log and C's hardware.
func TestReview35v_DeadBladeBacksOffNeighbourFenceMinutes(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("2", hwC)
	srv := httptest.NewTLSServer(deadBladeHangsCollection(b, "1"))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 500 * time.Millisecond, CallTimeout: 2 * time.Second})
	ctx := context.Background()
	h := pool.Controller("h", systemTarget(srv, "1", bmcPassword))
	c := pool.Controller("c", systemTarget(srv, "2", bmcPassword))

	// H polled every 5 s while the chassis keeps it dead: each poll past
	// the back-off is another login of the shared account.
	var last error
	for range 40 {
		_, last = h.State(ctx)
		clk.Advance(5 * time.Second)
	}
	t.Logf("H's last read: %v; logins %d", last, b.Logins())

	err := c.Off(ctx, power.ModeHard)
	if err != nil {
		clk.Advance(time.Minute)
		err2 := c.Off(ctx, power.ModeHard)
		t.Logf("C's fence: %v; a minute later: %v", err, err2)
		err = err2
	}
	st, _ := hwC.State(ctx)
	t.Logf("resets %v; C %s; logins %d", b.Resets(), st, b.Logins())
	assert.NoError(t, err, "C's fence (credentials right, C's system answering) refused for minutes behind its dead neighbour's logins")
	assert.Equal(t, power.StateOff, st, "host C, fenced, is still powered")
}

// TestReview35v_DeadBladesReadsStarveHealthyReads (review round 22, issue
// 35 point 1: "calls on a controller that is already open go through; a
// host's failure never refuses another host whose ... session is open";
// round 21's change: Config.MaxInFlight caps the reads in flight per
// session, commands bypass it). A chassis of ten blades, one account, so
// one shared session; every host connected while its blade worked. Then
// eight blades die (their reads hang) and stay dead: the monitor keeps
// reading them, each read running to its CallTimeout (the Pool never
// backs off calls on an open controller). Those reads hold the
// session's four read places (and queue ahead for them) for ever, and the healthy blades' reads,
// on the same open session, wait for a place until their own deadline:
// a healthy host's state can no longer be read for as long as its
// neighbours are dead (a monitor then takes it for unreachable). Here
// CallTimeout is 2 s and the healthy blade's check gives itself 500 ms:
// the emulator answers it at once, yet every check fails.
// Ground truth: the emulator answers the healthy blade at once.
func TestReview35v_DeadBladesReadsStarveHealthyReads(t *testing.T) {
	const n, nDead = 10, 8
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	var dead atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() && r.Method == http.MethodGet {
			for i := 1; i <= nDead; i++ {
				if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/"+strconv.Itoa(i)) {
					<-r.Context().Done()
					return
				}
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 2 * time.Second})
	ctx := context.Background()
	var hosts []power.Controller
	for i := 1; i <= n; i++ {
		h := pool.Controller("h"+strconv.Itoa(i), systemTarget(srv, strconv.Itoa(i), bmcPassword))
		_, err := h.State(ctx)
		require.NoError(t, err)
		hosts = append(hosts, h)
	}
	dead.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range hosts[:nDead] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = h.State(ctx)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	var fails []error
	for range 8 {
		st := time.Now()
		hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond) // a health check's own deadline
		_, err := hosts[nDead].State(hctx)
		cancel()
		t.Logf("healthy read %v: %v", time.Since(st).Round(time.Millisecond), err)
		if err != nil {
			fails = append(fails, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("healthy blade's reads failed %d of 8: %v; logins %d", len(fails), fails, b.Logins())
	assert.Empty(t, fails, "a healthy blade's reads on its open session fail while eight neighbours are dead")
}

// TestReview35v_ForgottenJoinerDiscardsEarlyLogin (review round 22, issue
// 35 point 5 "Forget" and point 1; round 21's change: a login's session
// is shared once the BMC accepts it, pool_join.go). One chassis account:
// host A (blade 1, which the BMC reads in 400 ms) is fenced and logs in;
// the session is shared early and host B (blade 2) joins it. B is then
// forgotten (its Secret changed, an inventory reload): detachLocked sees
// no entry left on the session and retires it, although A's own login,
// still reading its system, is the session's owner. A's Connect then
// succeeds, settleEarlyLocked finds the session retired and logs it out:
// A's fence fails busy, never sent, on a login the BMC accepted and a
// system that answered. Ground truth: the emulator's reset log and A's
// hardware.
func TestReview35v_ForgottenJoinerDiscardsEarlyLogin(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/redfish/v1/Systems/1" {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(400 * time.Millisecond):
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: 2 * time.Second, CallTimeout: 3 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	bb := pool.Controller("b", systemTarget(srv, "2", bmcPassword))

	fence := make(chan error, 1)
	go func() { fence <- a.Off(ctx, power.ModeHard) }()
	time.Sleep(100 * time.Millisecond)
	_, err := bb.State(ctx)
	require.NoError(t, err, "B's join of the early-shared session")
	pool.Forget("b")
	err = <-fence
	st, _ := hwA.State(ctx)
	t.Logf("A's fence: %v; resets %v; A %s; logins %d", err, b.Resets(), st, b.Logins())
	assert.NoError(t, err, "A's fence failed: its accepted login was thrown away when a neighbour that joined it was forgotten")
	assert.Equal(t, power.StateOff, st, "host A, fenced, is still powered")
}

// TestReview35v_DeadBladesReadsStarveNeighbourFenceJoin (review round 22,
// issue 35 point 1; round 21's change: "MaxInFlight cap per session
// (commands bypass)"). A chassis of 14 blades, one account, so one
// shared session; twelve blades connected while they worked, then died
// (their reads hang) and are still read by the monitor, each read running
// to its CallTimeout. Blade 14 (healthy, never called before: a host
// touched only when it is remediated) is fenced. Its fence needs a
// controller first: its join of the shared session reads its system, and
// that read is no power command's, so it queues for one of the session's
// four read places behind the dead blades' reads until ConnectTimeout.
// The join fails, counts as the host's own failure (it backs off alone),
// and the fence is refused, never sent, although the BMC answers blade
// 14 at once (a retry past the host's back-off may get a place in time,
// or not, by the phase of the dead reads). Ground truth: the emulator's reset log and the blade's
// hardware.
func TestReview35v_DeadBladesReadsStarveNeighbourFenceJoin(t *testing.T) {
	const n, nDead = 14, 12
	hw := []*fake.Power{fake.NewPower(time.Now, fake.PowerConfig{})}
	b := redfishtest.NewBMC(time.Now, hw[0], "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		p := fake.NewPower(time.Now, fake.PowerConfig{})
		hw = append(hw, p)
		b.AddSystem(strconv.Itoa(i), p)
	}
	var dead atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/"); ok && dead.Load() && r.Method == http.MethodGet {
			if i, err := strconv.Atoi(id); err == nil && i <= nDead {
				<-r.Context().Done()
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 2 * time.Second})
	ctx := context.Background()
	var hosts []power.Controller
	for i := 1; i <= n; i++ {
		h := pool.Controller("h"+strconv.Itoa(i), systemTarget(srv, strconv.Itoa(i), bmcPassword))
		if i <= nDead {
			_, err := h.State(ctx)
			require.NoError(t, err)
		}
		hosts = append(hosts, h)
	}
	dead.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range hosts[:nDead] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = h.State(ctx)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	err := hosts[n-1].Off(ctx, power.ModeHard)
	st, _ := hw[n-1].State(ctx)
	// The remediation retries, past the host's own back-off each time,
	// while the dead blades stay dead (logged only: whether a retry's
	// join gets a place in time depends on the dead reads' phase).
	for try := 2; err != nil && try <= 3; try++ {
		clk.Advance(5 * time.Minute)
		rerr := hosts[n-1].Off(ctx, power.ModeHard)
		t.Logf("fence try %d: %v", try, rerr)
		if rerr == nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("blade %d's fence: %v; resets %v; blade %s; logins %d", n, err, b.Resets(), st, b.Logins())
	assert.NoError(t, err, "a healthy blade's fence refused: its join queued behind dead neighbours' reads")
	assert.Equal(t, power.StateOff, st, "the fenced healthy blade is still powered")
}
