package ipmi_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// Review 39 round 12 (point 2): OnChecked's check runs after Get Chassis
// Status was answered and before the power up is sent (ground truth: the
// BMC's own command log); a check that refuses sends nothing and its error
// matches power.ErrNotSent and the check's error.
func TestOnCheckedChecksAfterTheReadAndRefusalSendsNothing(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	var _ power.CheckedOner = c
	p.OutOfBandOff()

	no := errors.New("no longer wanted")
	var atCheck []string
	err := c.OnChecked(ctx, func(context.Context) error { atCheck = b.Commands(); return no })
	require.Error(t, err)
	assert.ErrorIs(t, err, no)
	assert.ErrorIs(t, err, power.ErrNotSent)
	require.NotEmpty(t, atCheck)
	assert.Equal(t, ipmitest.Status, atCheck[len(atCheck)-1], "the state read was answered before the check")
	assert.NotContains(t, b.Commands(), ipmitest.PowerUp)
	assert.False(t, p.HardwareOn())

	require.NoError(t, c.OnChecked(ctx, func(context.Context) error { atCheck = b.Commands(); return nil }))
	assert.Equal(t, append(atCheck, ipmitest.PowerUp), b.Commands(), "the power up is the only command after the check")
	assert.True(t, p.HardwareOn())
}
