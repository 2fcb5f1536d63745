package power_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_CloseLeavesInUseRetiredJoinedSessionLoggedIn (fd8d3e2,
// the fix of TestReview35_CloseLeavesTrimmedJoinedSessionLoggedIn is
// partial): blades 1 and 2 behind one chassis manager that answers blade
// 1's system in 400 ms and blade 2's in 800 ms. Host A is connected
// (session s1) and a State of A runs on s1; host B joins s1 meanwhile.
// Host A is then forgotten (deleted from the inventory) while its call
// still runs: s1, with no host left, is retired while in use and joined.
// fd8d3e2 tracks a session retired while joined (p.joinedRetired) only
// when no call uses it at that moment; here A's call ends afterwards
// (doneLocked: joins > 0, so not closed, and not tracked either). The
// process then shuts down: Pool.Close "logs every session out", and
// fd8d3e2 "Close logs out the sessions retired while joined". Close walks
// the live sessions and p.joinedRetired: s1 is in neither, and Close
// returns with it still logged in at the manager (it is logged out only
// when B's join ends, after Close, outside its wait: a process exiting
// then never logs it out). Ground truth: the emulator's own count of
// open sessions right after Close returns.
func TestReview35_CloseLeavesInUseRetiredJoinedSessionLoggedIn(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", bmcPassword)
	b.AddSystem("2", hw2)
	sb2 := &slowBlade{h: b, path: "/redfish/v1/Systems/2", delay: 800 * time.Millisecond}
	sb1 := &slowBlade{h: sb2, path: "/redfish/v1/Systems/1", delay: 400 * time.Millisecond}
	srv := httptest.NewTLSServer(sb1)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })

	pool := power.NewPool(power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Sessions())

	called := make(chan error, 1)
	go func() { // A's call, on s1 (400 ms)
		_, err := a.State(ctx)
		called <- err
	}()
	time.Sleep(50 * time.Millisecond)
	joined := make(chan error, 1)
	go func() { // B joins s1 (800 ms)
		_, err := pool.Controller("b", systemTarget(srv, "2", bmcPassword)).State(ctx)
		joined <- err
	}()
	time.Sleep(100 * time.Millisecond)
	pool.Forget("a") // s1 retired: in use (A's call) and joined (B)
	require.NoError(t, <-called)

	start := time.Now()
	require.NoError(t, pool.Close())
	open := b.Sessions()
	t.Logf("Close returned after %s; sessions open at the manager: %d", time.Since(start).Round(time.Millisecond), open)
	assert.Equal(t, 0, open, "Close returned with the retired, joined session still logged in at the BMC")
	t.Logf("B's call: %v", <-joined)
	time.Sleep(300 * time.Millisecond)
	t.Logf("after the join: %d", b.Sessions())
}

// slowLogoutK is a controller whose logout (Close) takes d: a BMC slow to
// end a session, as chassis managers are.
type slowLogoutK struct {
	power.Controller
	open *atomic.Int64
	d    time.Duration
}

func (c *slowLogoutK) Close() error {
	time.Sleep(c.d)
	c.open.Add(-1)
	return nil
}

// TestReview35_EvictingFenceRefusedWhenAnotherCallEnds (fd8d3e2 fixes
// one trigger of TestReview35_EvictedJoinedSessionRefusesFence, not the
// bug): a chassis manager with the default MaxSessions 2, whose logouts
// take 1 s. Session s1 (login v1, host A) and s2 (login v2, host D) are
// open; host C's credentials (v3) logged in there before (proven). Host
// A's state is being read (300 ms) when C is fenced (hard Off, 5 s
// deadline): the BMC is at the bound, s1 is in use, so C's login evicts
// the idle s2 and waits for its logout. A's read ends meanwhile: its end
// wakes every waiter of the BMC (doneLocked), and C's login looks again:
// the BMC is still at the bound (s2's logout runs), s1 is idle, and "one
// was closed for a login less than 1m0s ago": C's fence fails at once as
// busy, never sent, although it is the login that evicted and the slot it
// freed comes a moment later. The doc: a proven login at the bound "waits
// for a session to become idle, and then closes the least recently used
// idle one ... other such logins fail at once as busy": C is not another
// login. Any wake of the BMC's waiters during the evicted session's
// logout (a call ending, a join ending, a Forget) does it; fd8d3e2 only
// stopped evicting joined sessions. Ground truth: C's fake power.
func TestReview35_EvictingFenceRefusedWhenAnotherCallEnds(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var open atomic.Int64
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	target := func(login string, ctrl power.Controller) power.Target {
		return power.Target{BMC: "https://chassis", Config: login, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			open.Add(1)
			return &slowLogoutK{Controller: ctrl, open: &open, d: time.Second}, nil
		}}
	}
	c := pool.Controller("c", target("v3", hwC))
	_, err := c.State(ctx) // C's credentials are proven on the BMC
	require.NoError(t, err)
	clk.Advance(time.Second)
	a := pool.Controller("a", target("v1", slowStateJ{d: 300 * time.Millisecond}))
	_, err = a.State(ctx) // s1
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	_, err = pool.Controller("d", target("v2", alwaysOn{})).State(ctx) // s2, trims C's
	require.NoError(t, err)
	time.Sleep(1200 * time.Millisecond) // C's session logged out
	require.EqualValues(t, 2, open.Load())
	clk.Advance(2 * time.Minute) // past LoginInterval

	read := make(chan error, 1)
	go func() { // A's state is read (300 ms), on s1
		_, err := a.State(ctx)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond)

	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err = c.Off(fctx, power.ModeHard) // the fence of C
	t.Logf("fence of C after %s: %v; sessions open %d", time.Since(start).Round(time.Millisecond), err, open.Load())
	assert.NoError(t, err, "C's fence was refused: its login evicted s2, then another call's end made it look again")
	assert.False(t, hwC.HardwareOn(), "ground truth: C is still powered")
	require.NoError(t, <-read)
}
