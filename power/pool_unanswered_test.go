package power_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolUnansweredCountsAgainstLoginUnlessAnswered (issue 35 point 1,
// review round 23): a Connect in which the BMC answered no request sent
// with the credentials (power.ErrUnanswered) backs the login off, as a
// refusal would (AuthBackoff, its other hosts wait), unless a request
// with the same credentials was answered within LoginInterval: then it
// backs the host alone off and its neighbours still connect.
func TestPoolUnansweredCountsAgainstLoginUnlessAnswered(t *testing.T) {
	unanswered := power.Unanswered(&power.Error{Op: "list systems", Class: power.ClassBusy, Err: context.DeadlineExceeded})
	target := func(fail bool) power.Target {
		hw := fake.NewPower(time.Now, fake.PowerConfig{})
		return power.Target{BMC: "chassis", Login: "admin/pw", Config: "basic",
			Connect: func(context.Context) (power.Controller, error) {
				if fail {
					return nil, unanswered
				}
				return hw, nil
			}}
	}
	ctx := context.Background()

	t.Run("no answer yet: the login's", func(t *testing.T) {
		clk := newClock()
		pool := newPool(t, clk, power.PoolConfig{})
		_, err := pool.Controller("dead", target(true)).State(ctx)
		require.ErrorIs(t, err, power.ErrUnanswered)
		assert.False(t, errors.Is(err, power.ErrAuth), "not told as a wrong password")
		clk.Advance(5 * time.Second)
		_, err = pool.Controller("other", target(false)).State(ctx)
		assert.ErrorIs(t, err, power.ErrBackoff, "the login backs off after an unanswered Connect with no answer to its credentials")
		clk.Advance(30 * time.Second) // AuthBackoff
		_, err = pool.Controller("other", target(false)).State(ctx)
		assert.NoError(t, err)
	})
	t.Run("answered lately: the host's own", func(t *testing.T) {
		clk := newClock()
		pool := newPool(t, clk, power.PoolConfig{})
		_, err := pool.Controller("working", target(false)).State(ctx)
		require.NoError(t, err)
		clk.Advance(5 * time.Second)
		dead := pool.Controller("dead", target(true))
		_, err = dead.State(ctx)
		require.ErrorIs(t, err, power.ErrUnanswered)
		_, err = pool.Controller("other", target(false)).State(ctx)
		assert.NoError(t, err, "a neighbour refused after a host's unanswered Connect, its credentials answered 5 s before")
		_, err = dead.State(ctx)
		assert.ErrorIs(t, err, power.ErrBackoff, "the host itself backs off")
	})
}
