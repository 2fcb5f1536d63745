package power_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctxProbe is a controller that records what the context of each call
// it gets looks like, and can block until the context ends.
type ctxProbe struct {
	name   string
	block  bool
	calls  atomic.Int32
	closed atomic.Int32
	mu     sync.Mutex
	seen   []ctxSeen
}

type ctxSeen struct {
	value       any
	deadline    time.Time
	hasDeadline bool
	errAtEnd    error
	doneAtEnd   bool
	errBefore   error // Err before the call blocks
	doneBefore  bool
}

type review35auKey struct{}

func (c *ctxProbe) record(ctx context.Context) {
	c.calls.Add(1)
	s := ctxSeen{value: ctx.Value(review35auKey{})}
	s.deadline, s.hasDeadline = ctx.Deadline()
	s.errBefore = ctx.Err()
	select {
	case <-ctx.Done():
		s.doneBefore = true
	default:
	}
	if c.block {
		<-ctx.Done()
		s.errAtEnd, s.doneAtEnd = ctx.Err(), true
	}
	c.mu.Lock()
	c.seen = append(c.seen, s)
	c.mu.Unlock()
}

func (c *ctxProbe) last() ctxSeen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[len(c.seen)-1]
}

func (c *ctxProbe) State(ctx context.Context) (power.State, error) {
	c.record(ctx)
	if err := ctx.Err(); err != nil && c.block {
		return power.StateUnknown, err
	}
	return power.StateOn, nil
}
func (c *ctxProbe) On(ctx context.Context) error                { c.record(ctx); return nil }
func (c *ctxProbe) Off(ctx context.Context, _ power.Mode) error { c.record(ctx); return nil }
func (c *ctxProbe) Close() error                                { c.closed.Add(1); return nil }

// TestReview35au_CallContextKeepsCallerValuesAndDeadlines (issue 35 point
// 3, doc: "bounds every State, On and Off call by CallTimeout (and the
// caller's own deadline)"): the context a pooled call hands the adapter
// is now the callState itself (f5ddf85). It must still carry the caller's
// values, the earlier of the caller's deadline and CallTimeout, and the
// caller's cancellation, with Err and Done agreeing. Passing: coverage of
// the refactor.
func TestReview35au_CallContextKeepsCallerValuesAndDeadlines(t *testing.T) {
	const callTimeout = 3 * time.Second
	probe := &ctxProbe{name: "p"}
	pool := newPool(t, newClock(), power.PoolConfig{CallTimeout: callTimeout})
	c := pool.Controller("node-0", power.Target{BMC: "bmc-0", Connect: func(context.Context) (power.Controller, error) { return probe, nil }})

	base := context.WithValue(context.Background(), review35auKey{}, "caller's")
	// No deadline: CallTimeout.
	before := time.Now()
	_, err := c.State(base)
	require.NoError(t, err)
	s := probe.last()
	assert.Equal(t, "caller's", s.value, "the caller's value is not visible to the adapter")
	require.True(t, s.hasDeadline, "a call without a caller's deadline has none: unbounded I/O")
	assert.WithinDuration(t, before.Add(callTimeout), s.deadline, time.Second)

	// A later deadline: CallTimeout still.
	late, cancel := context.WithTimeout(base, time.Hour)
	defer cancel()
	before = time.Now()
	_, err = c.State(late)
	require.NoError(t, err)
	s = probe.last()
	assert.Equal(t, "caller's", s.value)
	assert.WithinDuration(t, before.Add(callTimeout), s.deadline, time.Second, "a caller's later deadline replaced CallTimeout")

	// An earlier deadline: the caller's.
	early, cancel2 := context.WithTimeout(base, 500*time.Millisecond)
	defer cancel2()
	want, _ := early.Deadline()
	err = c.Off(early, power.ModeSoft)
	require.NoError(t, err)
	s = probe.last()
	assert.Equal(t, "caller's", s.value)
	assert.Equal(t, want, s.deadline)
	assert.NoError(t, s.errBefore)
	assert.False(t, s.doneBefore)

	// Nested: a value set by the caller on a context that already carries
	// CallInfo (a check run inside another pooled call) is still visible,
	// and the call's own CallInfo wins.
	nested := power.WithCallInfo(base, power.CallInfo{CheckRefusal: true})
	_, err = c.State(nested)
	require.NoError(t, err)
	assert.Equal(t, "caller's", probe.last().value)

	// The caller cancels during the call: the adapter sees Canceled, the
	// caller gets an error at once, well before CallTimeout.
	probe.block = true
	ctx, cancel3 := context.WithCancel(base)
	go func() { time.Sleep(100 * time.Millisecond); cancel3() }()
	start := time.Now()
	_, err = c.State(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), callTimeout/2, "the caller's cancellation did not end the call")
	s = probe.last()
	assert.True(t, s.doneAtEnd)
	assert.ErrorIs(t, s.errAtEnd, context.Canceled)

	// Caller's earlier deadline reached during the call.
	ctx4, cancel4 := context.WithTimeout(base, 150*time.Millisecond)
	defer cancel4()
	start = time.Now()
	_, err = c.State(ctx4)
	require.Error(t, err)
	assert.Less(t, time.Since(start), callTimeout/2)
	assert.ErrorIs(t, probe.last().errAtEnd, context.DeadlineExceeded)
}

// TestReview35au_ForgetRetargetNeverReachesOldEndpoint (issue 35 point 5:
// Forget forgets; the kube controller forgets a host whose BMC address or
// Secret changed): the pooled Controller now caches its host's entry.
// After Forget and a new Controller for the host with a new BMC and new
// credentials, the new Controller's calls reach only the new BMC (ground
// truth: each fake BMC's own call count), the old session is logged out,
// and a stale cached entry is never used, while calls race Forget
// (run with -race). Passing: coverage of the cache.
func TestReview35au_ForgetRetargetNeverReachesOldEndpoint(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 2 * time.Second})
	var mu sync.Mutex
	made := map[string][]*ctxProbe{}
	target := func(bmc, cfg string) power.Target {
		return power.Target{BMC: bmc, Config: cfg, Connect: func(context.Context) (power.Controller, error) {
			p := &ctxProbe{name: bmc + "/" + cfg}
			mu.Lock()
			made[p.name] = append(made[p.name], p)
			mu.Unlock()
			return p, nil
		}}
	}
	calls := func(name string) (n int32, open int) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range made[name] {
			n += p.calls.Load()
			if p.closed.Load() == 0 {
				open++
			}
		}
		return n, open
	}
	old := pool.Controller("node-0", target("bmc-old", "secret-v1"))
	_, err := old.State(context.Background())
	require.NoError(t, err)
	pool.Forget("node-0")
	require.Eventually(t, func() bool { _, open := calls("bmc-old/secret-v1"); return open == 0 }, 2*time.Second, 5*time.Millisecond, "the forgotten host's session was not logged out")
	nw := pool.Controller("node-0", target("bmc-new", "secret-v2"))
	oldCalls, _ := calls("bmc-old/secret-v1")
	for range 5 {
		_, err = nw.State(context.Background())
		require.NoError(t, err)
	}
	n, open := calls("bmc-new/secret-v2")
	assert.Equal(t, int32(5), n)
	assert.Equal(t, 1, open)
	after, _ := calls("bmc-old/secret-v1")
	assert.Equal(t, oldCalls, after, "a call of the new Controller reached the old BMC")
	if tg, ok := nw.(interface{ TogglesOn() bool }); ok {
		_ = tg.TogglesOn()
	}

	// Races: the old and new Controllers of one host and a third with the
	// same Target as the new one call while the host is forgotten.
	same := pool.Controller("node-0", target("bmc-new", "secret-v2"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, c := range []power.Controller{old, nw, same, nw} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.State(context.Background())
				if tg, ok := c.(interface{ TogglesOff(power.Mode) bool }); ok {
					_ = tg.TogglesOff(power.ModeSoft)
				}
			}
		}()
	}
	for i := range 200 {
		pool.Forget("node-0")
		if i%10 == 0 {
			clk.Advance(time.Hour) // past any back-off
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Settle: forget, then every session the Pool opened is logged out.
	pool.Forget("node-0")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ps := range made {
			for _, p := range ps {
				if p.closed.Load() == 0 {
					return false
				}
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a session of a forgotten host stayed open")
	mu.Lock()
	for _, ps := range made {
		for _, p := range ps {
			assert.LessOrEqual(t, p.closed.Load(), int32(1), "%s closed twice", p.name)
		}
	}
	mu.Unlock()
}

// TestReview35au_IdleListChurnClosesEverySession (doc: "closes a session
// when no call used it for PoolConfig.IdleTimeout"): after churn (calls,
// Forget, hosts back, other Targets) through the new intrusive idle list,
// every session left idle for IdleTimeout is logged out (ground truth:
// the controllers' Close), none twice, and a session in use is not.
// Passing: coverage of pool_idle.go.
func TestReview35au_IdleListChurnClosesEverySession(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: 40 * time.Millisecond, CallTimeout: 2 * time.Second})
	var mu sync.Mutex
	var all []*ctxProbe
	target := func(i, v int) power.Target {
		return power.Target{BMC: fmt.Sprintf("bmc-%d", i%7), Config: fmt.Sprintf("cfg-%d-%d", i, v), Connect: func(context.Context) (power.Controller, error) {
			p := &ctxProbe{name: fmt.Sprint(i)}
			mu.Lock()
			all = append(all, p)
			mu.Unlock()
			return p, nil
		}}
	}
	const hosts = 60
	for round := range 6 {
		for i := range hosts {
			h := fmt.Sprintf("node-%d", i)
			switch (i + round) % 4 {
			case 0:
				pool.Forget(h)
			case 1:
				_, _ = pool.Controller(h, target(i, round)).State(context.Background())
			default:
				_, _ = pool.Controller(h, target(i, 0)).State(context.Background())
			}
		}
		clk.Advance(time.Minute) // past back-offs, and the idle timeout
	}
	openCount := func() (open, twice int) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range all {
			switch p.closed.Load() {
			case 0:
				open++
			case 1:
			default:
				twice++
			}
		}
		return open, twice
	}
	clk.Advance(time.Hour)
	require.Eventually(t, func() bool { open, _ := openCount(); return open == 0 }, 5*time.Second, 10*time.Millisecond,
		"sessions idle past IdleTimeout stayed open")
	_, twice := openCount()
	assert.Zero(t, twice, "a session was logged out twice")
	// And the list still works after the churn: a new call logs in once,
	// and its session is closed once idle.
	before := len(all)
	c := pool.Controller("node-x", target(999, 0))
	_, err := c.State(context.Background())
	require.NoError(t, err)
	_, err = c.State(context.Background())
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, before+1, len(all))
	mu.Unlock()
	clk.Advance(time.Hour)
	require.Eventually(t, func() bool { open, _ := openCount(); return open == 0 }, 5*time.Second, 10*time.Millisecond)
}

// checkingProbe runs CallInfo.Check on every State, with a read slower
// than the call's deadline, ignoring its context: the call is given up
// on while the check runs, and the adapter's goroutine keeps using the
// call's context (the callState, f5ddf85) after that.
type checkingProbe struct {
	asked  atomic.Int32
	errs   atomic.Int32
	closed atomic.Int32
}

func (c *checkingProbe) State(ctx context.Context) (power.State, error) {
	ci := power.CallInfoFrom(ctx)
	if ci.CheckRefusal {
		c.asked.Add(1)
		_ = ci.Check(ctx, func(context.Context) power.Verdict {
			time.Sleep(600 * time.Millisecond)
			return power.CredentialsWork
		})
	}
	if ctx.Err() != nil {
		c.errs.Add(1)
	}
	_ = ctx.Value(review35auKey{})
	_, _ = ctx.Deadline()
	return power.StateUnknown, fmt.Errorf("refused: %w", power.ErrAuth)
}
func (c *checkingProbe) On(context.Context) error              { return nil }
func (c *checkingProbe) Off(context.Context, power.Mode) error { return nil }
func (c *checkingProbe) Close() error                          { c.closed.Add(1); return nil }

// TestReview35au_AbandonedCallCheckRaceFree: run with -race. A call given
// up on past its deadline while its adapter still runs CallInfo.Check and
// reads its context; the Pool's state stays consistent (the next call
// after the back-off logs in again and works). Passing: coverage.
func TestReview35au_AbandonedCallCheckRaceFree(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 200 * time.Millisecond})
	probes := []*checkingProbe{}
	var mu sync.Mutex
	target := power.Target{BMC: "bmc-0", Login: "shared-login", Connect: func(context.Context) (power.Controller, error) {
		p := &checkingProbe{}
		mu.Lock()
		probes = append(probes, p)
		mu.Unlock()
		return p, nil
	}}
	a := pool.Controller("node-a", target)
	b := pool.Controller("node-b", target)
	var wg sync.WaitGroup
	for _, c := range []power.Controller{a, b, a} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.State(context.WithValue(context.Background(), review35auKey{}, 1))
			assert.Error(t, err)
		}()
	}
	wg.Wait()
	time.Sleep(time.Second) // the adapters' goroutines end
	mu.Lock()
	asked := int32(0)
	for _, p := range probes {
		asked += p.asked.Load()
	}
	mu.Unlock()
	t.Logf("connects %d, checks asked %d", len(probes), asked)
	pool.Forget("node-a")
	pool.Forget("node-b")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range probes {
			if p.closed.Load() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a session was not closed exactly once")
}
