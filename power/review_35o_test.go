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

// TestReview35_CarriedOnLoginRevivesStaleCredentials (632235d): the login
// an eviction was made for goes on after its caller gives up
// (carryOnLocked), with the Target of that caller. The goroutine calls
// acquireLocked again with it, and acquireLocked's entryLocked replaces
// the host's entry whenever the Target differs. A chassis manager (default
// MaxSessions 2) whose logouts take 1.5 s; host C's credentials v3 are
// proven there; sessions of v1 (host A) and v2 (host D) are open. C's read
// (a 200 ms deadline) evicts one of them and gives up; the login goes on.
// Meanwhile C's Secret is rotated on the BMC and in the cluster: C's
// Target is now v4, and C's next read logs in with v4 and is served.
// When the evicted session's logout ends, the carried-on login wakes with
// the old Target: it replaces C's current entry by the stale one (the v4
// session C just opened is logged out) and logs in with the rotated-out
// password v3, refused by the BMC (a wrong-password login that counts
// towards the account's lockout), and C's next read has to log in again.
// Ground truth: the logins the BMC got per password, and the refusals.
func TestReview35_CarriedOnLoginRevivesStaleCredentials(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	var open atomic.Int64
	var rotated atomic.Bool
	var mu sync.Mutex
	logins := map[string]int{}
	refused := 0
	target := func(login string) power.Target {
		return power.Target{BMC: "https://chassis", Config: login, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			mu.Lock()
			defer mu.Unlock()
			logins[login]++
			if login == "v3" && rotated.Load() {
				refused++
				return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Message: "bad password", Err: power.ErrAuth}
			}
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
	_, err = a.State(ctx)
	require.NoError(t, err)
	_, err = d.State(ctx)
	require.NoError(t, err)
	clk.Advance(5 * time.Second)

	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.State(cctx) // evicts A's or D's session, gives up: the login goes on
	cancel()
	require.Error(t, err)

	rotated.Store(true) // C's password rotated on the BMC and in C's Secret
	c = pool.Controller("c", target("v4"))
	_, err = c.State(ctx)
	require.NoError(t, err, "C with its new credentials")
	mu.Lock()
	v3Before := logins["v3"]
	mu.Unlock()

	time.Sleep(2500 * time.Millisecond) // the evicted session's logout ends
	clk.Advance(5 * time.Second)
	_, err = c.State(ctx)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("logins %v; refused %d; sessions open %d", logins, refused, open.Load())
	assert.Equal(t, v3Before, logins["v3"], "a login with C's rotated-out password after C moved to its new one")
	assert.Zero(t, refused, "the BMC refused a login with the old password, made for a caller that left")
	assert.Equal(t, 1, logins["v4"], "C's session with its new credentials was logged out by the stale login, and C logged in again")
}
