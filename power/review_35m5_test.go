package power_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_EvictionForGivenUpCallerStarvesHost: issue 35 point 3
// ("caller cancellation is not the BMC's fault: let the login finish and
// keep its controller"), applied to the eviction 933852e holds a slot
// for. A chassis manager (default MaxSessions 2) whose logouts take
// 1.5 s; logins v1 (host A) and v2 (host D) open, read every 5 s; host
// C's credentials (v3) proven there, read every 5 s with a 1 s deadline.
// C's read evicts the least recently used session (the BMC does the
// logout), waits for it, and its caller gives up before the logout ends:
// the slot is released with the caller, no login is made, and the
// evicted host logs in again into the slot at its next read; C's next
// tries fail "busy" for the rest of the minute, and a minute later the
// same again. Over three minutes C is never served while three working
// sessions are logged out for it and logged in again. A login whose
// caller gives up goes on (Pool.login); the login an eviction was made
// for should too. Ground truth: the controllers' logins and logouts.
func TestReview35_EvictionForGivenUpCallerStarvesHost(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	var open atomic.Int64
	var mu sync.Mutex
	logins := map[string]int{}
	target := func(login string) power.Target {
		return power.Target{BMC: "https://chassis", Config: login, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			mu.Lock()
			logins[login]++
			mu.Unlock()
			open.Add(1)
			return &slowLogoutK{Controller: alwaysOn{}, open: &open, d: 1500 * time.Millisecond}, nil
		}}
	}
	c := pool.Controller("c", target("v3"))
	_, err := c.State(ctx) // C's credentials are proven on the BMC
	require.NoError(t, err)
	clk.Advance(time.Second)
	a := pool.Controller("a", target("v1"))
	_, err = a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	d := pool.Controller("d", target("v2"))
	_, err = d.State(ctx) // trims C's session
	require.NoError(t, err)
	time.Sleep(1700 * time.Millisecond)
	clk.Advance(2 * time.Minute)

	served := 0
	for range 36 { // three minutes, a read of each host every 5 s
		_, _ = a.State(ctx)
		_, _ = d.State(ctx)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := c.State(cctx); err == nil {
			served++
		}
		cancel()
		clk.Advance(5 * time.Second)
		time.Sleep(300 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("C served %d of 36 reads; logins %v; sessions open %d", served, logins, open.Load())
	assert.Positive(t, served, "C was never served: each eviction made for it was given up with its caller")
	assert.LessOrEqual(t, logins["v1"]+logins["v2"], 3,
		"working sessions logged out for a login that was never made, and logged in again: %v", logins)
}
