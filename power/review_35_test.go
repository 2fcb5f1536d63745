package power_test

import (
	"context"
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

// okLogins counts the logins the emulator accepted (its own log).
func okLogins(b *redfishtest.BMC) int {
	n := 0
	for _, r := range b.LoginLog() {
		if r.OK {
			n++
		}
	}
	return n
}

// TestReview35_WrongPasswordLoginClosesWorkingSession: behind one Redfish
// service at its session bound (MaxSessions 1), host A has an open,
// working session; host B's stale Secret needs a login. B's login evicts
// A's live session before it is even tried, and then fails: A's next call,
// a moment later, finds no session and waits behind B's (slow, failing)
// login, and is refused; A has to log in again. "One host's wrong password
// never refuses another host whose credentials differ or whose session is
// open" (power/doc.go) is false at the bound. Ground truth: the
// emulator's own login log (A's credentials were accepted twice).
func TestReview35_WrongPasswordLoginClosesWorkingSession(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.Quirks.LoginDelay = 600 * time.Millisecond // a slow BMC (800 ms is common)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, newClock(), power.PoolConfig{MaxSessions: 1})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, okLogins(b))

	bad := pool.Controller("b", systemTarget(srv, "2", "stale"))
	done := make(chan error, 1)
	go func() { _, err := bad.State(ctx); done <- err }()
	time.Sleep(150 * time.Millisecond)

	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	s, err := a.State(actx)
	cancel()
	assert.NoError(t, err, "host A's call was refused because host B's wrong password needed a login")
	if err == nil {
		assert.Equal(t, power.StateOn, s)
	}
	assert.ErrorIs(t, <-done, power.ErrAuth)
	_, err = a.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, okLogins(b), "host A had to log in again: host B's failing login closed A's working session")
}

// gatedRelogin is a controller whose every State call re-logs in through
// the Pool's LoginGate (as power/redfish does on a 401), against a BMC
// whose login hangs until the adapter's own deadline: the outcome is the
// error power/redfish reports then (class busy, wrapping
// context.DeadlineExceeded: session.go relogin's reloginTimeout, classified
// by redfish.go classify).
type gatedRelogin struct {
	gate   power.LoginGate
	logins *atomic.Int32
}

func (g *gatedRelogin) State(ctx context.Context) (power.State, error) {
	done, err := g.gate(ctx)
	if err != nil {
		return power.StateUnknown, err
	}
	g.logins.Add(1)
	err = &power.Error{Op: "connect", Class: power.ClassBusy, Message: "timed out", Err: context.DeadlineExceeded}
	done(err)
	return power.StateUnknown, err
}
func (g *gatedRelogin) On(context.Context) error              { return nil }
func (g *gatedRelogin) Off(context.Context, power.Mode) error { return nil }

// TestReview35_HungReloginIsNeverBackedOff: a login made inside a call
// that outlives its deadline is not counted against the BMC by the
// LoginGate (pool_login.go: Canceled/DeadlineExceeded are "the call's
// deadline"), although power/redfish's re-login is detached from the
// caller and bounded only by its own 30 s reloginTimeout: a BMC whose
// logins hang is logged in to again at once, call after call, never backed
// off, each attempt holding the BMC's one login slot. The docs: logins
// back off "after a failed one (whatever the reason; a login that outlives
// ConnectTimeout included)", "between two logins after a failed one, at
// least Backoff".
func TestReview35_HungReloginIsNeverBackedOff(t *testing.T) {
	pool := newPool(t, newClock(), power.PoolConfig{}) // the clock never moves
	var logins atomic.Int32
	target := power.Target{BMC: "bmc", Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		return &gatedRelogin{gate: power.ConnectInfoFrom(ctx).Gate, logins: &logins}, nil
	}}
	c := pool.Controller("n", target)
	for range 10 {
		_, err := c.State(context.Background())
		require.Error(t, err)
	}
	assert.LessOrEqual(t, logins.Load(), int32(1), "logins to a BMC whose logins time out, within Backoff of a failed one")
}

// TestReview35_ForgetDuringLoginResurrectsHost: a host is forgotten (the
// kube controller saw it deleted) while its login runs and a second call
// of it waits for that login. The waiting call, once woken, makes the host
// anew, logs in to the deleted host's BMC again, and leaves an entry, a
// login and a session in the Pool that nobody will ever Forget (kube calls
// Forget once, on NotFound).
func TestReview35_ForgetDuringLoginResurrectsHost(t *testing.T) {
	pool := newPool(t, newClock(), power.PoolConfig{})
	var connects atomic.Int32
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	target := power.Target{BMC: "bmc", Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		connects.Add(1)
		started <- struct{}{}
		<-release
		return fake.NewPower(time.Now, fake.PowerConfig{}), nil
	}}
	c := pool.Controller("h", target)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = c.State(context.Background()) }()
	<-started
	go func() { defer wg.Done(); _, _ = c.State(context.Background()) }()
	time.Sleep(100 * time.Millisecond) // the second call waits for the first's login
	pool.Forget("h")
	close(release)
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	hosts, _, logins, live, _, _ := power.PoolSizes(pool)
	assert.Equal(t, int32(1), connects.Load(), "a forgotten host's BMC was logged in to again after Forget")
	assert.Zero(t, hosts+logins+live, "the Pool keeps a forgotten host (hosts %d, logins %d, live sessions %d)", hosts, logins, live)
}

// hungLogout is a controller whose Close (the logout) hangs until release
// is closed: a BMC that went dead with a session open.
type hungLogout struct {
	*fake.Power
	release chan struct{}
}

func (h *hungLogout) Close() error { <-h.release; return nil }

// TestReview35_DeadBMCsLogoutsStallHealthyBMC: 64 BMCs go dead (a rack
// switch fails) with a session open each, and their hosts are forgotten
// (or their sessions retired: calls timed out, Targets changed): their
// logouts take all of the Pool's 64 closers for up to 10 s each, in one
// queue. A healthy BMC whose host's Secret was rotated at that moment has
// its old session queued behind them, still counted against its
// MaxSessions: the host's login with its new, working credentials waits
// for the dead BMCs' logouts and is refused. One BMC's trouble must cost
// only its own hosts.
// deadN: as many dead BMCs as the Pool has closers (maxClosers, 64); with
// none, the test passes.
const deadN = 64

func TestReview35_DeadBMCsLogoutsStallHealthyBMC(t *testing.T) {
	release := make(chan struct{})
	pool := newPool(t, newClock(), power.PoolConfig{MaxSessions: 1, CallTimeout: time.Second})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ctx := context.Background()
	for i := range deadN {
		name := "dead-" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		c := pool.Controller(name, power.Target{BMC: name, Config: "v1", Connect: func(context.Context) (power.Controller, error) {
			return &hungLogout{Power: fake.NewPower(time.Now, fake.PowerConfig{}), release: release}, nil
		}})
		_, err := c.State(ctx)
		require.NoError(t, err)
	}
	good := func(v string) power.Target {
		return power.Target{BMC: "healthy", Config: v, Connect: func(context.Context) (power.Controller, error) {
			return fake.NewPower(time.Now, fake.PowerConfig{}), nil
		}}
	}
	_, err := pool.Controller("h", good("secret-v1")).State(ctx)
	require.NoError(t, err)
	for i := range deadN {
		pool.Forget("dead-" + string(rune('A'+i/26)) + string(rune('a'+i%26)))
	}
	// The Secret of host h rotates: a new Target, a new login.
	_, err = pool.Controller("h", good("secret-v2")).State(ctx)
	assert.NoError(t, err, "a healthy BMC's login waited behind the logouts of dead BMCs")
	close(release)
}
