package power_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// A Pool's Controller is a power.CheckedOner: it passes OnChecked on to
// the connected adapter, with the call's deadline in check's context, and
// refuses it (ErrUnsupported, ErrNotSent, nothing sent) for an adapter
// that has none.
func TestPoolOnCheckedPassesOnOrRefuses(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, nil, power.PoolConfig{CallTimeout: 5 * time.Second})
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	hw.OutOfBandOff()
	plain := p.Controller("plain", power.Target{BMC: "plain", Config: "v1",
		Connect: func(context.Context) (power.Controller, error) { return hw, nil }})
	err := plain.(power.CheckedOner).OnChecked(ctx, func(context.Context) error { t.Error("no check without OnChecked"); return nil })
	assert.ErrorIs(t, err, power.ErrUnsupported)
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.False(t, hw.HardwareOn())

	_, srv, hw2 := redfishBMC(t)
	hw2.OutOfBandOff()
	rf := p.Controller("rf", redfishTarget(srv, bmcPassword))
	no := errors.New("no")
	var deadline time.Time
	start := time.Now()
	err = rf.(power.CheckedOner).OnChecked(ctx, func(ctx context.Context) error {
		var ok bool
		deadline, ok = ctx.Deadline()
		assert.True(t, ok, "check runs within the call's deadline")
		return no
	})
	assert.ErrorIs(t, err, no)
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.False(t, hw2.HardwareOn())
	end := time.Now()
	assert.True(t, !deadline.Before(start.Add(5*time.Second)) && !deadline.After(end.Add(5*time.Second)),
		"the deadline is the call's (CallTimeout from its start): %v after the start", deadline.Sub(start))
	require.NoError(t, rf.(power.CheckedOner).OnChecked(ctx, func(context.Context) error { return nil }))
	assert.True(t, hw2.HardwareOn())
}
