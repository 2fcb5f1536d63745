package power_test

import (
	"context"
	"crypto/x509"
	"fmt"
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
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chassis35ap is one Redfish service (the emulator, with quirks q) for
// systems "1".."n", basic auth. deny1: system 1's resources answer 401
// (a per-blade privilege). checkHook, if set, serves
// /redfish/v1/SessionService instead of the emulator (it may block).
// Every 401 served is logged with the test clock's instant and path
// (ground truth: what the BMC refused).
type chassis35ap struct {
	b         *redfishtest.BMC
	srv       *httptest.Server
	roots     *x509.CertPool
	clk       *manualClock
	deny1     atomic.Bool
	checkHook atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
	mu        sync.Mutex
	refused   []time.Time
	paths     []string
}

func newChassis35ap(t *testing.T, clk *manualClock, n int, q redfishtest.Quirks) *chassis35ap {
	t.Helper()
	c := &chassis35ap{clk: clk}
	c.b = redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	c.b.Quirks = q
	for i := 2; i <= n; i++ {
		c.b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := c.checkHook.Load(); h != nil && r.URL.Path == "/redfish/v1/SessionService" && (*h)(w, r) {
			return
		}
		if c.deny1.Load() && (r.URL.Path == "/redfish/v1/Systems/1" || strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/1/")) {
			c.log(r.URL.Path)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InsufficientPrivilege","message":"not allowed"}}`))
			return
		}
		rec := httptest.NewRecorder()
		c.b.ServeHTTP(rec, r)
		if rec.Code == http.StatusUnauthorized {
			c.log(r.URL.Path)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(c.srv.Close)
	c.roots = x509.NewCertPool()
	c.roots.AddCert(c.srv.Certificate())
	return c
}

func (c *chassis35ap) log(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused = append(c.refused, c.clk.Now())
	c.paths = append(c.paths, p)
}

func (c *chassis35ap) refusals() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.refused...)
}

func (c *chassis35ap) target(id string) power.Target {
	return power.Target{BMC: c.srv.URL, Config: "admin/" + bmcPassword, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: c.srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: c.roots, BasicAuth: true})
	}}
}

// directState reads system id with the credentials, no Pool (ground
// truth: does the BMC answer them?).
func (c *chassis35ap) directState(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	d, err := redfish.Connect(ctx, redfish.Config{Endpoint: c.srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: c.roots, BasicAuth: true})
	require.NoError(t, err, "ground truth: the BMC answers the credentials")
	defer d.Close()
	_, err = d.State(ctx)
	require.NoError(t, err, "ground truth: the BMC answers the credentials")
}

// TestReview35ap_NoSessionServiceOneBlade401RefusesNeighboursFence
// (review 35ap; issue 35 item 1: "a host's failure never refuses another
// host whose credentials differ or whose session is open"; "A fencing
// request for A is refused although its credentials are right").
// Round 41's TestReview35ao2_OneBlade401RefusesIdleNeighboursFence,
// on a service without a SessionService (the emulator's
// NoSessionService quirk: sushy-tools, the virtual BMC of Metal3
// labs, one service for many systems, basic auth). The fix's check
// (refused.go refusedHere) reads /redfish/v1/SessionService, which
// answers 404 there: "failed" -> ErrAuth as before, and the old bug is
// back: A's blade's 401 backs the shared credentials off and B's fence
// is refused, although the BMC answers B's credentials all along
// (ground truth: a direct read of system 2).
func TestReview35ap_NoSessionServiceOneBlade401RefusesNeighboursFence(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{NoSessionService: true})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := b.State(ctx)
	require.NoError(t, err)
	clk.Advance(2 * time.Minute) // B idle
	_, err = a.State(ctx)
	require.NoError(t, err)

	ch.deny1.Store(true)
	for i := 0; i < 24; i++ { // two minutes, A polled every 5 s
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
	}
	ch.directState(t, "2")
	refusedB, triesB := 0, 0
	for i := 1; i <= 60; i++ { // five more minutes, B's fence tried every minute
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
		if i%12 == 0 {
			triesB++
			if err := b.Off(ctx, power.ModeSoft); err != nil {
				refusedB++
				t.Logf("t+%ds B's fence: %v", i*5, err)
			}
		}
	}
	assert.Zero(t, refusedB, "B's fences refused (of %d) for A's blade's 401, B's credentials right all along", triesB)
}

// TestReview35ap_CallerCancelDuringCheckBacksNeighboursOff (review 35ap;
// issue 35 item 3 "a cancelled caller backs off a healthy BMC ...
// Caller cancellation is not the BMC's fault", item 1 "a host's failure
// never refuses another host whose ... session is open"). A and B
// share the credentials on one chassis; A's blade answers 401; the
// BMC's SessionService is slow (answers in 1 s). A's caller gives up
// after 200 ms, while the check runs: refusedHere's check fails with the
// caller's context and the 401 is reported ErrAuth; release
// (pool_call.go) counts it against the credentials (failedLocked) and
// retires the session B uses. B's read right after is refused without
// being sent (ErrBackoff), although the BMC never refused the
// credentials (ground truth: the emulator's 401 log holds only system
// 1's paths, and a direct read of system 2 is answered).
func TestReview35ap_CallerCancelDuringCheckBacksNeighboursOff(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := b.State(ctx)
	require.NoError(t, err)
	_, err = a.State(ctx)
	require.NoError(t, err)

	slow := func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
		return false // then the emulator answers it
	}
	ch.checkHook.Store(&slow)
	ch.deny1.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, errA := a.State(cctx)
	cancel()
	t.Logf("A's cancelled read: %v", errA)
	ch.checkHook.Store(nil)

	clk.Advance(time.Second)
	_, errB := b.State(ctx)
	errOff := b.Off(ctx, power.ModeSoft)
	ch.mu.Lock()
	paths := append([]string(nil), ch.paths...)
	ch.mu.Unlock()
	for _, p := range paths {
		require.True(t, strings.HasPrefix(p, "/redfish/v1/Systems/1"), "ground truth: the BMC refused only system 1, not the credentials (%v)", paths)
	}
	ch.directState(t, "2")
	assert.NoError(t, errB, "B's read, its credentials answered all along, after A's caller gave up during A's check")
	assert.NoError(t, errOff, "B's fence, its credentials answered all along, after A's caller gave up during A's check")
}

// rotation35ap connects n hosts of one chassis with basic auth, polls
// each every 5 s (staggered), rotates the BMC's password and polls for
// three more minutes; the SessionService answers hook (when not nil).
// It returns the most 401s the BMC served in any minute and in all.
func rotation35ap(t *testing.T, n int, hook func(w http.ResponseWriter, r *http.Request) bool) (int, int) {
	clk := newClock()
	ch := newChassis35ap(t, clk, n, redfishtest.Quirks{})
	if hook != nil {
		ch.checkHook.Store(&hook)
	}
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / time.Duration(n)
	for round := 0; round < 2; round++ {
		for i := range hosts {
			clk.Advance(step)
			_, err := hosts[i].State(ctx)
			require.NoError(t, err)
		}
	}
	ch.b.SetCredentials("admin", "Rotated-n3w")
	for round := 0; round < 36; round++ {
		for i := range hosts {
			clk.Advance(step)
			_, _ = hosts[i].State(ctx)
		}
	}
	r := ch.refusals()
	return maxPerMinute(r), len(r)
}

// TestReview35ap_RotationWithUnauthenticatedCheckAnswerHammersBMC
// (review 35ap; package doc "a BMC with a wrong password sees at most
// two logins a minute with it"; CallInfo.CheckRefused "so that a BMC with
// a wrong password still sees at most two refused requests a minute").
// The password is rotated on a chassis whose SessionService answers
// without checking the credentials (a 200 login page to any request, or
// a BMC that does not protect the resource: the check's assumption,
// stated in the redfish doc as a fact). Every host's refused read is
// "checked" 2xx, becomes ErrSystemRefused, and release counts it as a
// success of the credentials (succeededLocked): each host backs off
// alone and sends the rotated password on its own schedule, so the
// BMC's lock-out counter sees a number of refused requests a minute that
// grows with the chassis. Ground truth: the 401s the emulator served.
func TestReview35ap_RotationWithUnauthenticatedCheckAnswerHammersBMC(t *testing.T) {
	page := func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>login</html>"))
		return true
	}
	for _, n := range []int{1, 2, 10} {
		perMin, total := rotation35ap(t, n, page)
		t.Logf("hosts=%d: refused requests: at most %d in a minute, %d in 3 minutes", n, perMin, total)
		assert.LessOrEqual(t, perMin, 3, "hosts=%d: requests refused with the rotated password in one minute; %d in 3 minutes", n, total)
	}
}

// TestReview35ap_RotationRefusedPerMinuteBasicAuth (review 35ap;
// coverage: the same rotation with the emulator's own, protected
// SessionService; package doc "at most two logins a minute" with a wrong
// password, for 1, 2, 10 and 100 hosts on one chassis). Ground truth:
// the 401s the emulator served (the check's own included).
func TestReview35ap_RotationRefusedPerMinuteBasicAuth(t *testing.T) {
	for _, n := range []int{1, 2, 10, 100} {
		perMin, total := rotation35ap(t, n, nil)
		t.Logf("hosts=%d: refused requests: at most %d in a minute, %d in 3 minutes", n, perMin, total)
		assert.LessOrEqual(t, perMin, 3, "hosts=%d: requests refused with the rotated password in one minute; %d in 3 minutes", n, total)
	}
}

// TestReview35ap_LoneHostsBlade401LocksOutLaterNeighbour (review 35ap;
// issue 35 item 1 "A fencing request for A is refused although its
// credentials are right"; REVIEW.md "liveness with the fault still
// on"). Host A is alone with its credentials on a chassis; its blade
// starts answering 401 (a per-blade privilege), so its refusals are
// taken for the credentials' (no neighbour: no check, documented) and
// back them off. Then host B, same credentials, system 2, is added and
// its fence is tried every minute for ten minutes while A is polled
// every 5 s. Every later login is "the login retried after their
// refusal" (CallInfo.CheckRefusal false while creds.auth:
// pool_login.go login, pool_join.go attach), so A's blade's 401 is
// never checked again, A's polls win each end of the back-off, and B's
// fences are refused for as long as A's blade refuses, although the BMC
// answers B's credentials (ground truth: a direct read of system 2).
func TestReview35ap_LoneHostsBlade401LocksOutLaterNeighbour(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	ch.deny1.Store(true)
	for i := 0; i < 24; i++ { // two minutes, A alone
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
	}
	b := pool.Controller("b", ch.target("2"))
	ch.directState(t, "2")
	refusedB, triesB := 0, 0
	for i := 1; i <= 120; i++ { // ten minutes
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
		if i%12 == 0 {
			triesB++
			if err := b.Off(ctx, power.ModeSoft); err != nil {
				refusedB++
				t.Logf("t+%ds B's fence: %v", i*5, err)
			}
		}
	}
	assert.Less(t, refusedB, triesB, "B's fences refused for ten minutes (%d of %d) for A's blade's 401, B's credentials answered all along", refusedB, triesB)
}

// TestReview35ap_SlowBMCCheckUnansweredBacksNeighboursOff (review 35ap;
// power/redfish doc "bounded by the call's context"; issue 35 item 1).
// A slow chassis (each request answered after 350 ms) and a
// CallTimeout of 600 ms: A's blade answers 401 at 350 ms and the check
// of it cannot be answered before the call's deadline. "Unanswered ->
// ErrAuth as before": release counts it against the credentials and
// retires the session B uses, and B's read and fence are refused
// without being sent, although the BMC never refused the credentials
// (ground truth: the emulator's 401 log holds only system 1's paths).
func TestReview35ap_SlowBMCCheckUnansweredBacksNeighboursOff(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 600 * time.Millisecond, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := b.State(ctx)
	require.NoError(t, err)
	_, err = a.State(ctx)
	require.NoError(t, err)

	old := ch.srv.Config.Handler
	var slow atomic.Bool
	ch.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			select {
			case <-time.After(350 * time.Millisecond):
			case <-r.Context().Done():
			}
		}
		old.ServeHTTP(w, r)
	})
	slow.Store(true)
	ch.deny1.Store(true)
	_, errA := a.State(ctx)
	t.Logf("A's read: %v", errA)
	slow.Store(false)

	clk.Advance(time.Second)
	_, errB := b.State(ctx)
	errOff := b.Off(ctx, power.ModeSoft)
	ch.mu.Lock()
	paths := append([]string(nil), ch.paths...)
	ch.mu.Unlock()
	for _, p := range paths {
		require.True(t, strings.HasPrefix(p, "/redfish/v1/Systems/1"), "ground truth: the BMC refused only system 1, not the credentials (%v)", paths)
	}
	ch.directState(t, "2")
	assert.NoError(t, errB, "B's read after A's check ran out of the call's time")
	assert.NoError(t, errOff, "B's fence after A's check ran out of the call's time")
}

// TestReview35ap_RotationWithChurnRefusedPerMinute (review 35ap; package
// doc "a BMC with a wrong password sees at most two logins a minute with
// it"; issue 35 items 1 and 5: churn). Ten hosts of one chassis with
// basic auth and a protected SessionService; the password is rotated;
// for three minutes every 5 s one host is forgotten (Forget) and a new
// one, same credentials, takes its system, and every host is polled.
// Ground truth: the 401s the emulator served, the checks' included.
func TestReview35ap_RotationWithChurnRefusedPerMinute(t *testing.T) {
	const n = 10
	clk := newClock()
	ch := newChassis35ap(t, clk, n, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	names := make([]string, n)
	hosts := make([]power.Controller, n)
	for i := range hosts {
		names[i] = fmt.Sprintf("h%d", i+1)
		hosts[i] = pool.Controller(names[i], ch.target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	ch.b.SetCredentials("admin", "Rotated-n3w")
	gen := 0
	step := 5 * time.Second / n
	for round := 0; round < 36; round++ {
		k := round % n
		pool.Forget(names[k])
		gen++
		names[k] = fmt.Sprintf("g%d-h%d", gen, k+1)
		hosts[k] = pool.Controller(names[k], ch.target(strconv.Itoa(k+1)))
		for i := range hosts {
			clk.Advance(step)
			_, _ = hosts[i].State(ctx)
		}
	}
	r := ch.refusals()
	ch.mu.Lock()
	for i := range r {
		t.Logf("refused at +%s: %s", r[i].Sub(r[0]), ch.paths[i])
	}
	ch.mu.Unlock()
	t.Logf("refused requests: at most %d in a minute, %d in 3 minutes", maxPerMinute(r), len(r))
	assert.LessOrEqual(t, maxPerMinute(r), 3, "requests refused with the rotated password in one minute, with churn")
}

// TestReview35ap_ConcurrentCallsAtRotationRefusedBurst (review 35ap;
// package doc "a BMC with a wrong password sees at most two logins a
// minute with it"; CallInfo.CheckRefused "so that a BMC with a wrong
// password still sees at most two refused requests a minute"). Twenty
// hosts of one chassis, basic auth, read at the same time (an executor
// polls its hosts concurrently), twice a second for five seconds after
// the password was rotated; the BMC's SessionService answers in 100 ms
// (a slow BMC). Each call's 401 waits for its check, and calls started
// meanwhile are sent with the rotated password, each followed by its
// own check: the BMC's lock-out counter sees 2n refused requests at once
// (n in-flight reads and n checks, all refused), where the
// check's doubling buys nothing after the first refused check. Ground
// truth: the 401s the emulator served.
func TestReview35ap_ConcurrentCallsAtRotationRefusedBurst(t *testing.T) {
	const n = 20
	clk := newClock()
	ch := newChassis35ap(t, clk, n, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	slow := func(w http.ResponseWriter, r *http.Request) bool {
		time.Sleep(100 * time.Millisecond)
		return false
	}
	ch.checkHook.Store(&slow)
	ch.b.SetCredentials("admin", "Rotated-n3w")
	for round := 0; round < 10; round++ {
		var wg sync.WaitGroup
		for i := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = hosts[i].State(ctx)
			}()
		}
		wg.Wait()
		clk.Advance(500 * time.Millisecond)
	}
	r := ch.refusals()
	t.Logf("refused requests: %d in 5 s", len(r))
	// The reads in flight when the password changed are refused, each
	// one (no Pool can call them back); their checks ask the BMC the
	// same question n times over: one refused check tells the Pool.
	assert.LessOrEqual(t, len(r), n+1, "requests refused with the rotated password, %d hosts read concurrently (the in-flight reads and one check)", n)
}
