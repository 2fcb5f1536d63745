package power_test

import (
	"context"
	"net/http/httptest"
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
