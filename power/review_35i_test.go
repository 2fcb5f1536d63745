package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_CloseLeavesJoinedSessionLoggedIn (bd0694c): blades 1 and 2
// behind one chassis manager (blade 2's system answered in 800 ms). Host
// A is connected: one session at the manager, idle. Host B's caller has a
// 300 ms deadline and gives up during B's join of A's session; since
// bd0694c the join goes on, detached, and holds the session open
// (session.joins). The process then shuts down: Pool.Close, which the
// package doc promises "closes every session (waiting up to 10 s for each
// BMC's logout)" and "logs every session out" (its only exceptions: a call
// running past its deadline, a login still running: neither is A's idle
// session). Close retires A's session but does not close it while joined,
// and does not wait for the join (not in p.wg): it returns with the
// session still logged in at the manager; a process exiting then never
// logs it out. Before bd0694c the caller itself waited for the join, so
// Close came after it. Ground truth: the emulator's own count of open
// sessions right after Close returns.
func TestReview35_CloseLeavesJoinedSessionLoggedIn(t *testing.T) {
	b, _, srv, _ := slowChassis(t, 800*time.Millisecond)
	pool := power.NewPool(power.PoolConfig{})
	ctx := context.Background()

	_, err := pool.Controller("a", systemTarget(srv, "1", bmcPassword)).State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Sessions())

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pool.Controller("b", systemTarget(srv, "2", bmcPassword)).State(short)
	cancel()
	require.Error(t, err) // gave up during the join

	start := time.Now()
	require.NoError(t, pool.Close())
	open := b.Sessions()
	t.Logf("Close returned after %s; sessions open at the manager: %d", time.Since(start), open)
	assert.Equal(t, 0, open, "Close returned with A's idle session still logged in at the BMC (a detached join held it open)")
	time.Sleep(1500 * time.Millisecond) // the join ends; the session is logged out after Close
	t.Logf("1.5 s later: %d", b.Sessions())
}
