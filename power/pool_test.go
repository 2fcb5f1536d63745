package power_test

import (
	"context"
	"crypto/x509"
	"errors"
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
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const bmcPassword = "Pool-s3cret"

// manualClock is a clock tests move by hand (the Pool's back-off and
// idleness run on it).
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *manualClock { return &manualClock{t: fake.Epoch} }

// redfishBMC serves a Redfish emulator over TLS on loopback.
func redfishBMC(t *testing.T) (*redfishtest.BMC, *httptest.Server, *fake.Power) {
	t.Helper()
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	return b, srv, p
}

func redfishTarget(srv *httptest.Server, password string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return redfishTargetAt(srv.URL, pool, password)
}

func redfishTargetAt(url string, pool *x509.CertPool, password string) power.Target {
	return power.Target{BMC: url, Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: url, Username: "admin", Password: password, RootCAs: pool})
	}}
}

func ipmiTarget(b *ipmitest.BMC, password string) power.Target {
	return power.Target{BMC: b.Addr(), Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		return ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: "admin", Password: password,
			Timeout: 200 * time.Millisecond, Retries: 1})
	}}
}

func newPool(t *testing.T, clk *manualClock, cfg power.PoolConfig) *power.Pool {
	t.Helper()
	if clk != nil {
		cfg.Now = clk.Now
	}
	p := power.NewPool(cfg)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// maxPerMinute returns the largest number of instants in any 60 s window.
func maxPerMinute(at []time.Time) int {
	best := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Minute; j++ {
			n++
		}
		best = max(best, n)
	}
	return best
}

// TestPoolWrongPasswordLoginsPerMinute: a caller that asks for the power
// state once a second (as the executor's jobs do) of a host whose BMC
// refuses the password causes at most two logins a minute, each failure
// is power.ErrAuth, and the calls in between fail at once with ErrBackoff
// without touching the BMC. Before the Pool, every such call was a login
// (60 a minute).
func TestPoolWrongPasswordLoginsPerMinute(t *testing.T) {
	type bmc struct {
		name   string
		target func(t *testing.T) (power.Target, func() int)
	}
	for _, tc := range []bmc{
		{"redfish", func(t *testing.T) (power.Target, func() int) {
			b, srv, _ := redfishBMC(t)
			return redfishTarget(srv, "wrong-password"), b.Logins
		}},
		{"ipmi", func(t *testing.T) (power.Target, func() int) {
			b, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return ipmiTarget(b, "wrong-password"), b.Logins
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			pool := newPool(t, clk, power.PoolConfig{})
			target, logins := tc.target(t)
			c := pool.Controller("node-0", target)
			var loginAt []time.Time
			authErrs, backoffs := 0, 0
			for range 600 { // ten minutes, one call a second
				before := logins()
				_, err := c.State(context.Background())
				require.Error(t, err)
				assert.Equal(t, power.ClassFailed, power.Classify(err), "an authentication failure is not busy: %v", err)
				require.ErrorIs(t, err, power.ErrAuth)
				assert.NotContains(t, err.Error(), "wrong-password")
				if errors.Is(err, power.ErrBackoff) {
					backoffs++
					assert.Equal(t, before, logins(), "a call refused for back-off reached the BMC")
				} else {
					authErrs++
				}
				for range logins() - before {
					loginAt = append(loginAt, clk.Now())
				}
				clk.Advance(time.Second)
			}
			perMinute := maxPerMinute(loginAt)
			t.Logf("%s: %d logins in 10 min, at most %d in any minute; %d authentication failures, %d calls refused for back-off",
				tc.name, len(loginAt), perMinute, authErrs, backoffs)
			assert.LessOrEqual(t, perMinute, 2)
			assert.LessOrEqual(t, len(loginAt), 8, "30 s, 60 s, 120 s, 240 s… between logins")
			assert.Positive(t, authErrs)
		})
	}
}

// TestAdaptersReportErrAuth: both adapters say a refused password with
// power.ErrAuth (class failed), and a good password works.
func TestAdaptersReportErrAuth(t *testing.T) {
	ctx := context.Background()
	_, srv, _ := redfishBMC(t)
	_, err := redfishTarget(srv, "wrong").Connect(ctx)
	require.ErrorIs(t, err, power.ErrAuth)
	assert.Equal(t, power.ClassFailed, power.Classify(err))
	c, err := redfishTarget(srv, bmcPassword).Connect(ctx)
	require.NoError(t, err)
	_ = c.(*redfish.Controller).Close()

	b, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
	require.NoError(t, err)
	defer b.Close()
	_, err = ipmiTarget(b, "wrong").Connect(ctx)
	require.ErrorIs(t, err, power.ErrAuth)
	assert.Equal(t, power.ClassFailed, power.Classify(err))
	wrongUser := power.Target{Connect: func(ctx context.Context) (power.Controller, error) {
		return ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: "nobody", Password: bmcPassword, Timeout: 200 * time.Millisecond})
	}}
	_, err = wrongUser.Connect(ctx)
	require.ErrorIs(t, err, power.ErrAuth, "an unknown user name")
	c, err = ipmiTarget(b, bmcPassword).Connect(ctx)
	require.NoError(t, err)
	_ = c.(*ipmi.Controller).Close()
}

// hangingTCP accepts connections and never answers.
func hangingTCP(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = &atomic.Int32{}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), accepted
}

// TestPoolHangingBMC: a BMC that accepts connections and never answers
// holds a caller no longer than the Pool's deadline, and the next calls
// back off without connecting again.
func TestPoolHangingBMC(t *testing.T) {
	t.Run("redfish", func(t *testing.T) {
		addr, accepted := hangingTCP(t)
		clk := newClock()
		pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 300 * time.Millisecond, CallTimeout: time.Second})
		c := pool.Controller("node-0", redfishTargetAt("https://"+addr, nil, bmcPassword))
		start := time.Now()
		_, err := c.State(context.Background())
		took := time.Since(start)
		require.Error(t, err)
		assert.Equal(t, power.ClassBusy, power.Classify(err), "%v", err)
		assert.Less(t, took, 2*time.Second, "the hanging BMC held the caller")
		n := accepted.Load()
		_, err = c.State(context.Background())
		require.ErrorIs(t, err, power.ErrBackoff)
		assert.Equal(t, n, accepted.Load(), "a call during back-off connected")
		clk.Advance(time.Minute)
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.NotErrorIs(t, err, power.ErrBackoff)
	})
	t.Run("ipmi", func(t *testing.T) {
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		defer conn.Close()
		var got atomic.Int32
		go func() {
			buf := make([]byte, 1500)
			for {
				if _, _, err := conn.ReadFrom(buf); err != nil {
					return
				}
				got.Add(1)
			}
		}()
		host, port, _ := net.SplitHostPort(conn.LocalAddr().String())
		portN, _ := strconv.Atoi(port)
		pool := newPool(t, newClock(), power.PoolConfig{ConnectTimeout: 500 * time.Millisecond, CallTimeout: time.Second})
		c := pool.Controller("node-0", power.Target{BMC: conn.LocalAddr().String(), Connect: func(ctx context.Context) (power.Controller, error) {
			return ipmi.Connect(ctx, ipmi.Config{Host: host, Port: portN, Username: "admin", Password: bmcPassword, Timeout: 10 * time.Second})
		}})
		start := time.Now()
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.Less(t, time.Since(start), 2*time.Second, "the silent BMC held the caller")
		assert.Equal(t, power.ClassBusy, power.Classify(err), "%v", err)
		n := got.Load()
		assert.Positive(t, n)
		_, err = c.State(context.Background())
		require.ErrorIs(t, err, power.ErrBackoff)
	})
}

// stuckController ignores its context: a call never returns until
// released.
type stuckController struct {
	release chan struct{}
	closed  atomic.Bool
}

func (s *stuckController) State(context.Context) (power.State, error) {
	<-s.release
	return power.StateOn, nil
}
func (s *stuckController) On(context.Context) error              { <-s.release; return nil }
func (s *stuckController) Off(context.Context, power.Mode) error { <-s.release; return nil }
func (s *stuckController) Close() error                          { s.closed.Store(true); return nil }

// TestPoolCallDeadlineWithControllerIgnoringContext: a controller that does
// not honour its context (a BMC library stuck in a read without deadline)
// still returns to the caller at the Pool's deadline; the controller is
// retired, counts against the BMC's sessions until its call returns, and
// is closed then.
func TestPoolCallDeadlineWithControllerIgnoringContext(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 200 * time.Millisecond, MaxSessions: 1})
	stuck := &stuckController{release: make(chan struct{})}
	var connects atomic.Int32
	target := power.Target{BMC: "bmc-0", Connect: func(context.Context) (power.Controller, error) {
		if connects.Add(1) == 1 {
			return stuck, nil
		}
		return fake.NewPower(time.Now, fake.PowerConfig{}), nil
	}}
	c := pool.Controller("node-0", target)
	start := time.Now()
	err := c.Off(context.Background(), power.ModeHard)
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	clk.Advance(time.Hour) // past the back-off
	// The stuck call still holds the BMC's only session.
	_, err = c.State(context.Background())
	require.Error(t, err)
	assert.Equal(t, int32(1), connects.Load(), "a second session was opened while the stuck one is open")
	close(stuck.release)
	require.Eventually(t, stuck.closed.Load, 2*time.Second, 10*time.Millisecond, "the stuck controller was not closed")
	clk.Advance(time.Hour)
	s, err := c.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	assert.Equal(t, int32(2), connects.Load())
}

// TestPoolBMCGoesAway: a BMC whose service stops answers nothing; calls
// fail fast, and once it is back a call succeeds again.
func TestPoolBMCGoesAway(t *testing.T) {
	t.Run("redfish", func(t *testing.T) {
		p := fake.NewPower(time.Now, fake.PowerConfig{})
		b := redfishtest.NewBMC(time.Now, p, "admin", bmcPassword)
		ca, err := redfishtest.NewCA()
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		serve := func(ln net.Listener) *httptest.Server {
			srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: b}, TLS: ca.ServerConfig()}
			srv.StartTLS()
			return srv
		}
		srv := serve(ln)
		clk := newClock()
		pool := newPool(t, clk, power.PoolConfig{CallTimeout: time.Second})
		c := pool.Controller("node-0", redfishTargetAt("https://"+addr, ca.Pool(), bmcPassword))
		s, err := c.State(context.Background())
		require.NoError(t, err)
		assert.Equal(t, power.StateOn, s)
		srv.Close() // the BMC goes away

		start := time.Now()
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.NotErrorIs(t, err, power.ErrAuth)
		// The session is still open: calls on it are tried (issue 35:
		// only logins back off), and fail as fast.
		start = time.Now()
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)

		ln, err = net.Listen("tcp", addr) // back at the same address
		require.NoError(t, err)
		srv = serve(ln)
		defer srv.Close()
		clk.Advance(time.Minute)
		s, err = c.State(context.Background())
		require.NoError(t, err)
		assert.Equal(t, power.StateOn, s)
		assert.LessOrEqual(t, b.Sessions(), 1)
	})
	t.Run("ipmi", func(t *testing.T) {
		b, err := ipmitest.NewBMC(fake.NewPower(time.Now, fake.PowerConfig{}), ipmitest.Config{Username: "admin", Password: bmcPassword})
		require.NoError(t, err)
		defer b.Close()
		clk := newClock()
		pool := newPool(t, clk, power.PoolConfig{CallTimeout: 2 * time.Second})
		c := pool.Controller("node-0", ipmiTarget(b, bmcPassword))
		_, err = c.State(context.Background())
		require.NoError(t, err)
		require.NoError(t, b.Close()) // goes away
		start := time.Now()
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.Less(t, time.Since(start), 3*time.Second)
		start = time.Now()
		_, err = c.State(context.Background())
		require.Error(t, err)
		assert.Less(t, time.Since(start), 3*time.Second)
		require.NoError(t, b.Restart()) // back, with no session
		clk.Advance(time.Minute)
		s, err := c.State(context.Background())
		require.NoError(t, err)
		assert.Equal(t, power.StateOn, s)
	})
}

// TestPoolSessionBoundAndIdleClose: five hosts behind one BMC, at most two
// sessions open on it at any time; idle controllers are closed (logged
// out), and Forget closes a host's at once.
func TestPoolSessionBoundAndIdleClose(t *testing.T) {
	b, srv, _ := redfishBMC(t)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 2, IdleTimeout: time.Minute})
	target := redfishTarget(srv, bmcPassword)
	var (
		mu   sync.Mutex
		high int
	)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() { // samples the BMC's open sessions
		defer close(watched)
		for {
			n := b.Sessions()
			mu.Lock()
			high = max(high, n)
			mu.Unlock()
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	hosts := []string{"a", "b", "c", "d", "e"}
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := pool.Controller(h, target)
			for range 5 {
				_, err := c.State(context.Background())
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	close(stopWatch)
	<-watched
	assert.LessOrEqual(t, high, 2, "sessions open at once on one BMC")
	assert.LessOrEqual(t, b.Sessions(), 2)

	pool.Forget("a")
	pool.Forget("b")
	pool.Forget("c")
	pool.Forget("d")
	c := pool.Controller("e", target)
	_, err := c.State(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Sessions() == 1 }, 2*time.Second, 10*time.Millisecond, "Forget did not log out")
	clk.Advance(2 * time.Minute)
	require.Eventually(t, func() bool { return b.Sessions() == 0 }, 3*time.Second, 10*time.Millisecond, "the idle controller was not closed")
	logins := b.Logins()
	_, err = c.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, logins+1, b.Logins(), "a call after idle close logs in again")
}

// TestPoolConfigChange: a new Target.Config closes the old controller and
// clears the back-off (new credentials are tried at once).
func TestPoolConfigChange(t *testing.T) {
	b, srv, _ := redfishBMC(t)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	bad := redfishTarget(srv, "wrong")
	_, err := pool.Controller("n", bad).State(context.Background())
	require.ErrorIs(t, err, power.ErrAuth)
	_, err = pool.Controller("n", bad).State(context.Background())
	require.ErrorIs(t, err, power.ErrBackoff)
	good := redfishTarget(srv, bmcPassword)
	good.Config = "v2"
	s, err := pool.Controller("n", good).State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	assert.Equal(t, 1, b.Sessions())
	require.NoError(t, pool.Close())
	assert.Equal(t, 0, b.Sessions(), "Close logs out")
	_, err = pool.Controller("n", good).State(context.Background())
	require.ErrorIs(t, err, power.ErrPoolClosed)
}

// TestPoolConnectRefusedWithStatusBacksOff: a BMC that answers every login
// with a status (503, 500) gets no login a second: a failed connect backs
// off whatever its reason, and a success clears it.
func TestPoolConnectRefusedWithStatusBacksOff(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	var connects atomic.Int32
	var up atomic.Bool
	c := pool.Controller("n", power.Target{BMC: "bmc", Connect: func(context.Context) (power.Controller, error) {
		connects.Add(1)
		if !up.Load() {
			return nil, &power.Error{Op: "connect", Class: power.ClassBusy, Status: 503, Message: "service unavailable"}
		}
		return fake.NewPower(time.Now, fake.PowerConfig{}), nil
	}})
	for range 10 {
		_, err := c.State(context.Background())
		require.Error(t, err)
		clk.Advance(100 * time.Millisecond)
	}
	assert.Equal(t, int32(1), connects.Load(), "logins within the first second")
	clk.Advance(time.Second)
	_, err := c.State(context.Background())
	require.Error(t, err)
	assert.Equal(t, int32(2), connects.Load())
	_, err = c.State(context.Background())
	require.ErrorIs(t, err, power.ErrBackoff)
	up.Store(true)
	clk.Advance(2 * time.Second)
	_, err = c.State(context.Background())
	require.NoError(t, err)
	_, err = c.State(context.Background())
	require.NoError(t, err, "a success clears the back-off")
}

// BenchmarkPoolState: the cost a Pool adds to a call on an open controller
// (a goroutine and the bookkeeping), against an in-memory controller.
func BenchmarkPoolState(b *testing.B) {
	pool := power.NewPool(power.PoolConfig{})
	defer pool.Close()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	c := pool.Controller("n", power.Target{BMC: "bmc", Connect: func(context.Context) (power.Controller, error) { return hw, nil }})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.State(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
