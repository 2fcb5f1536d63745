package power_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_EvictingFenceLosesSlotToUnprovenLogin (7b3b9d2 makes a
// login that evicted wait for "ep.sessions > len(ep.live)", not for the
// slot it freed): a chassis manager with the default MaxSessions 2,
// whose logouts take 1 s. s1 (login v1, host A) and s2 (login v2, host
// D) are open and idle; host C's credentials (v3) are proven there. C is
// fenced (hard Off, 5 s deadline): the BMC is at the bound, so C's login
// evicts s1 and waits for its logout. Meanwhile host E (credentials v4,
// never logged in there: a new host, or a rotated password) is read: the
// BMC counts 2 sessions (s1's logout runs), so E's login is the one
// "tried first, one over the bound" (3 counted). It succeeds; the doc
// says "only its success closes the least recently used idle session",
// but trimLocked counts live sessions only (s2 and E's: 2) and closes
// nothing. s1's logout ends: the BMC is at the bound with s2 and E's
// session, C's own eviction is done (sessions == live), so C evicts
// again, "less than 1m0s ago" (its own eviction): C's fence fails at
// once as busy, never sent, and every retry fails the same way for a
// minute. Ground truth: C's fake power.
func TestReview35_EvictingFenceLosesSlotToUnprovenLogin(t *testing.T) {
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
	_, err = pool.Controller("a", target("v1", alwaysOn{})).State(ctx) // s1
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	_, err = pool.Controller("d", target("v2", alwaysOn{})).State(ctx) // s2, trims C's
	require.NoError(t, err)
	time.Sleep(1200 * time.Millisecond) // C's session logged out
	require.EqualValues(t, 2, open.Load())
	clk.Advance(2 * time.Minute) // past LoginInterval

	fenced := make(chan error, 1)
	start := time.Now()
	go func() {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		fenced <- c.Off(fctx, power.ModeHard) // the fence of C: evicts s1
	}()
	time.Sleep(200 * time.Millisecond)                                 // s1's logout runs
	_, err = pool.Controller("e", target("v4", alwaysOn{})).State(ctx) // an unproven login
	require.NoError(t, err)

	err = <-fenced
	t.Logf("fence of C after %s: %v; sessions open %d", time.Since(start).Round(time.Millisecond), err, open.Load())
	assert.NoError(t, err, "C's fence was refused: the slot its eviction freed went to an unproven login whose success closed nothing")
	assert.False(t, hwC.HardwareOn(), "ground truth: C is still powered")
	assert.LessOrEqual(t, open.Load(), int64(2))
}

// TestReview35_CloseLeavesSessionOfRunningCallLoggedIn: Close "closes
// every session ... A call still running past its deadline when Close is
// called (a controller that ignores its context), or a login still
// running, closes its session in the background when it returns, after
// Close"; the package doc: "Close it on shutdown (it logs every session
// out)". A call well within its deadline, honouring its context (a 500 ms
// read), runs when the process shuts down (SIGTERM during a rollout of
// the operator): Close retires the session (in use: not closed), marks
// the Pool waiting, and returns at once; the call ends 500 ms later and
// its session's logout runs outside Close's wait. A process that exits
// when Close returns never logs it out: the BMC keeps one of its few
// sessions until its own timeout. Ground truth: the controller's count
// of sessions not logged out, right after Close returns.
func TestReview35_CloseLeavesSessionOfRunningCallLoggedIn(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var open atomic.Int64
	a := pool.Controller("a", power.Target{BMC: "https://bmc-a", Config: "v1", Login: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		open.Add(1)
		return &slowLogoutK{Controller: slowStateJ{d: 500 * time.Millisecond}, open: &open, d: 10 * time.Millisecond}, nil
	}})
	_, err := a.State(ctx)
	require.NoError(t, err)
	read := make(chan error, 1)
	go func() { _, err := a.State(ctx); read <- err }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	require.NoError(t, pool.Close())
	n := open.Load()
	t.Logf("Close returned after %s with %d session(s) logged in; the call: %v", time.Since(start).Round(time.Millisecond), n, <-read)
	assert.EqualValues(t, 0, n, "Close returned with the session of a call within its deadline still logged in")
}
