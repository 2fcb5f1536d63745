package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// onlyPower hides the Resetter of a fake.Power: an adapter that cannot
// reset.
type onlyPower struct{ power.Controller }

// TestPoolReset (issue 39, point 3): a Pool's Controller is a
// power.Resetter; its Reset is the connected adapter's (one reset of the
// hardware, never off), and an adapter that cannot reset gives
// ErrUnsupported and touches nothing.
func TestPoolReset(t *testing.T) {
	ctx := context.Background()
	pool := power.NewPool(power.PoolConfig{})
	defer pool.Close()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	start := time.Now()
	c := pool.Controller("h1", power.Target{BMC: "bmc-1", Config: "v1",
		Connect: func(context.Context) (power.Controller, error) { return hw, nil }})
	r, ok := c.(power.Resetter)
	require.True(t, ok, "a Pool's Controller is a Resetter")
	require.NoError(t, r.Reset(ctx))
	assert.Len(t, hw.Resets(), 1)
	assert.False(t, hw.WasOffDuring(start, time.Now()))

	plain := fake.NewPower(time.Now, fake.PowerConfig{})
	c2 := pool.Controller("h2", power.Target{BMC: "bmc-2", Config: "v1",
		Connect: func(context.Context) (power.Controller, error) { return onlyPower{plain}, nil }})
	require.ErrorIs(t, c2.(power.Resetter).Reset(ctx), power.ErrUnsupported)
	assert.Empty(t, plain.Resets())
	assert.Empty(t, plain.Calls(), "no call reached the hardware")
}
