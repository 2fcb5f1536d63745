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
