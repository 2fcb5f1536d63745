package power_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
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

// chassis serves one Redfish service for systems "1".."n" (a blade
// chassis), each over its own hardware.
func chassis(t *testing.T, n int) (*redfishtest.BMC, *httptest.Server, []*fake.Power) {
	t.Helper()
	hw := []*fake.Power{fake.NewPower(time.Now, fake.PowerConfig{})}
	b := redfishtest.NewBMC(time.Now, hw[0], "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		p := fake.NewPower(time.Now, fake.PowerConfig{})
		hw = append(hw, p)
		b.AddSystem(string(rune('0'+i)), p)
	}
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	return b, srv, hw
}

// systemTarget reaches system id of the chassis at srv with password; the
// Config names the credentials only (as the inventory's does), so hosts
// with the same credentials have the same Config.
func systemTarget(srv *httptest.Server, id, password string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return power.Target{BMC: srv.URL, Config: "admin/" + password, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: password, RootCAs: pool})
	}}
}

// TestPoolNeighbourWrongPasswordRefusesNoOne (issue 35, point 1): behind
// one Redfish service for systems 1 and 2, host B's stale Secret fails its
// login; host A's open session keeps working (State and a soft Off, a
// second later and for as long as B keeps failing), and host C, whose
// credentials are right but who has no session yet, logs in.
func TestPoolNeighbourWrongPasswordRefusesNoOne(t *testing.T) {
	b, srv, _ := chassis(t, 3)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	bad := pool.Controller("b", systemTarget(srv, "2", "stale"))
	_, err = bad.State(ctx)
	require.ErrorIs(t, err, power.ErrAuth)
	for range 5 {
		clk.Advance(time.Second)
		s, err := a.State(ctx)
		require.NoError(t, err, "host A's open session was refused because host B's password is wrong")
		assert.Equal(t, power.StateOn, s)
		_, err = bad.State(ctx)
		require.ErrorIs(t, err, power.ErrAuth)
	}
	require.NoError(t, a.Off(ctx, power.ModeSoft), "a fencing request for A was refused")
	c := pool.Controller("c", systemTarget(srv, "3", bmcPassword))
	_, err = c.State(ctx)
	require.NoError(t, err, "host C's right credentials were refused because host B's are wrong")
	assert.Contains(t, b.Resets(), "GracefulShutdown")
}

// TestPoolSharesOneSessionPerService (issue 35, point 2): four hosts
// behind one service, the default bound of two sessions, each read every
// 5 s for ten minutes: one login in all (one session shared by the four
// systems), never more than one session open.
func TestPoolSharesOneSessionPerService(t *testing.T) {
	b, srv, _ := chassis(t, 4)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var ctrls []power.Controller
	for i, id := range []string{"1", "2", "3", "4"} {
		ctrls = append(ctrls, pool.Controller("host-"+id, systemTarget(srv, []string{"1", "2", "3", "4"}[i], bmcPassword)))
	}
	var loginAt []time.Time
	reads := 0
	for range 30 {
		for _, c := range ctrls {
			before := b.Logins()
			s, err := c.State(ctx)
			require.NoError(t, err)
			assert.Equal(t, power.StateOn, s)
			reads++
			for range b.Logins() - before {
				loginAt = append(loginAt, clk.Now())
			}
			assert.LessOrEqual(t, b.Sessions(), 1, "sessions open on the service")
		}
		clk.Advance(5 * time.Second)
	}
	t.Logf("%d reads, %d logins, at most %d in any minute", reads, len(loginAt), maxPerMinute(loginAt))
	assert.LessOrEqual(t, maxPerMinute(loginAt), 1, "logins per minute to one endpoint")
	assert.Equal(t, 1, len(loginAt))
}

// slowLogin is a Connect that takes d (a slow BMC login), counting logins
// and failing none.
type slowLogin struct {
	d      time.Duration
	logins atomic.Int32
	closed atomic.Int32
}

func (s *slowLogin) connect(ctx context.Context) (power.Controller, error) {
	s.logins.Add(1)
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &closeCounter{Power: fake.NewPower(time.Now, fake.PowerConfig{}), n: &s.closed}, nil
}

type closeCounter struct {
	*fake.Power
	n *atomic.Int32
}

func (c *closeCounter) Close() error { c.n.Add(1); return nil }

// TestPoolCallerCancelDuringLoginIsNotTheBMCsFault (issue 35, point 3): a
// caller whose context ends during a slow login gets a busy error at once;
// the next caller is not refused, and is served by that same login (it is
// not thrown away): one login in all.
func TestPoolCallerCancelDuringLoginIsNotTheBMCsFault(t *testing.T) {
	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			pool := newPool(t, newClock(), power.PoolConfig{})
			sl := &slowLogin{d: 400 * time.Millisecond}
			target := power.Target{BMC: "bmc", Config: "v1", Connect: sl.connect}
			var ctx context.Context
			var cancel context.CancelFunc
			if how == "cancel" {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			start := time.Now()
			_, err := pool.Controller("n", target).State(ctx)
			require.Error(t, err)
			assert.Less(t, time.Since(start), 350*time.Millisecond, "the caller was held past its context")
			assert.Equal(t, power.ClassBusy, power.Classify(err), "%v", err)
			s, err := pool.Controller("n", target).State(context.Background())
			require.NoError(t, err, "the next caller was refused after a caller gave up")
			assert.Equal(t, power.StateOn, s)
			assert.Equal(t, int32(1), sl.logins.Load(), "the login the first caller gave up on was thrown away")
			assert.Equal(t, int32(0), sl.closed.Load())
		})
	}
}

// TestPoolCallerCancelDuringCallIsNotTheBMCsFault (issue 35, point 3): a
// caller whose own deadline (shorter than CallTimeout) ends during a call
// on a slow but healthy BMC does not back the BMC off.
func TestPoolCallerCancelDuringCallIsNotTheBMCsFault(t *testing.T) {
	pool := newPool(t, newClock(), power.PoolConfig{})
	slow := &slowState{d: 200 * time.Millisecond}
	target := power.Target{BMC: "bmc", Config: "v1", Connect: func(context.Context) (power.Controller, error) { return slow, nil }}
	c := pool.Controller("n", target)
	_, err := c.State(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = c.State(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = c.State(context.Background())
	require.NoError(t, err, "a caller's short deadline backed the BMC off")
}

type slowState struct{ d time.Duration }

func (s *slowState) State(ctx context.Context) (power.State, error) {
	select {
	case <-time.After(s.d):
		return power.StateOn, nil
	case <-ctx.Done():
		return power.StateUnknown, &power.Error{Op: "state", Class: power.ClassBusy, Err: ctx.Err()}
	}
}
func (s *slowState) On(context.Context) error              { return nil }
func (s *slowState) Off(context.Context, power.Mode) error { return nil }

// loginWatch wraps a BMC handler: every login takes delay, and it records
// the most logins in flight at once.
type loginWatch struct {
	h      http.Handler
	delay  time.Duration
	mu     sync.Mutex
	now    int
	most   int
	logins int
}

func (w *loginWatch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/redfish/v1/SessionService/Sessions" {
		w.mu.Lock()
		w.now++
		w.logins++
		w.most = max(w.most, w.now)
		w.mu.Unlock()
		time.Sleep(w.delay)
		defer func() { w.mu.Lock(); w.now--; w.mu.Unlock() }()
	}
	w.h.ServeHTTP(rw, r)
}

// TestPoolReloginsOneAtATime (issue 35, point 6): sessions that expire
// mid-call are re-established inside the call; those logins too go one at
// a time per endpoint, like the Pool's own.
func TestPoolReloginsOneAtATime(t *testing.T) {
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
	b.Quirks.SessionRequests = 3
	w := &loginWatch{h: b, delay: 20 * time.Millisecond}
	srv := httptest.NewTLSServer(w)
	defer srv.Close()
	pool := newPool(t, newClock(), power.PoolConfig{MaxSessions: 8})
	var wg sync.WaitGroup
	for i := range 6 {
		target := redfishTarget(srv, bmcPassword)
		target.Config = "host-" + string(rune('a'+i)) // own session each
		c := pool.Controller(target.Config, target)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				_, err := c.State(context.Background())
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d logins, at most %d at once", w.logins, w.most)
	assert.Greater(t, w.logins, 6, "no session expired: the test tests nothing")
	assert.Equal(t, 1, w.most, "logins in flight at once to one endpoint")
}

// TestPoolReloginRefusedBacksOff (issue 35, point 6): a password changed on
// the BMC under open sessions: the re-login inside a call is refused, and
// no other login follows within AuthBackoff.
func TestPoolReloginRefusedBacksOff(t *testing.T) {
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
	b.Quirks.SessionRequests = 2
	srv := b.StartTLS()
	defer srv.Close()
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	c := pool.Controller("n", redfishTarget(srv, bmcPassword))
	_, err := c.State(context.Background())
	require.NoError(t, err)
	b.SetCredentials("admin", "rotated")
	var authErrs int
	before := b.Logins()
	for range 20 {
		_, err := c.State(context.Background())
		if errors.Is(err, power.ErrAuth) {
			authErrs++
		}
		clk.Advance(time.Second)
	}
	assert.Positive(t, authErrs)
	assert.LessOrEqual(t, b.Logins()-before, 1, "logins within 20 s of a refused re-login")
}

// TestPoolForgetKeepsLoginBackoff: a host whose password was refused,
// forgotten and back at once (churn), does not log in again before the
// back-off is over; once it is, the Pool keeps nothing of it.
func TestPoolForgetKeepsLoginBackoff(t *testing.T) {
	b, srv, _ := redfishBMC(t)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	bad := redfishTarget(srv, "wrong")
	_, err := pool.Controller("n", bad).State(context.Background())
	require.ErrorIs(t, err, power.ErrAuth)
	pool.Forget("n")
	_, err = pool.Controller("n", bad).State(context.Background())
	require.ErrorIs(t, err, power.ErrBackoff)
	assert.Equal(t, 1, b.Logins())
	pool.Forget("n")
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool {
		h, e, l, live, idle, parked := power.PoolSizes(pool)
		return h+e+l+live+idle+parked == 0
	}, 5*time.Second, 10*time.Millisecond, "the Pool keeps the back-off of a forgotten host after it is over")
}
