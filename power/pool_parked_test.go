package power_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/require"
)

// TestPool_ParkedLoginsDroppedInOrderOfBackoff: three logins whose
// passwords were refused at different times, their hosts forgotten: each
// is kept (parked) until its own back-off is over, and then dropped, the
// soonest over first (the janitor takes them off a heap, no scan).
func TestPool_ParkedLoginsDroppedInOrderOfBackoff(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: 40 * time.Millisecond}) // janitor every 10 ms
	ctx := context.Background()
	for i := range 3 {
		login := fmt.Sprintf("v%d", i)
		c := pool.Controller("h"+login, power.Target{BMC: "bmc", Config: login, Connect: func(context.Context) (power.Controller, error) {
			return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Err: power.ErrAuth}
		}})
		_, err := c.State(ctx)
		require.ErrorIs(t, err, power.ErrAuth)
		pool.Forget("h" + login)
		clk.Advance(10 * time.Second) // AuthBackoff 30 s: over at 30, 40 and 50 s
	}
	elapsed := 30 * time.Second // the clock since the first refusal
	parked := func() int { _, _, _, _, _, n := power.PoolSizes(pool); return n }
	for _, c := range []struct {
		at   time.Duration // since the first refusal
		want int
	}{{29 * time.Second, 3}, {31 * time.Second, 2}, {41 * time.Second, 1}, {51 * time.Second, 0}} {
		clk.Advance(c.at - elapsed)
		elapsed = c.at
		require.Eventually(t, func() bool { return parked() == c.want }, 5*time.Second, 5*time.Millisecond, "at %s", c.at)
		time.Sleep(50 * time.Millisecond) // a few sweeps: nothing dropped early
		require.Equal(t, c.want, parked(), "at %s", c.at)
	}
}
