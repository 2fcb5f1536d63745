package ipmi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestPowerDownRefusedAsAlreadyOff: a BMC that refuses power down of a
// chassis that is off with D5h ("not supported in present state", an
// authenticated answer) gives success when a fresh read says off; the
// same refusal of a host that runs stays an error (ground truth).
func TestPowerDownRefusedAsAlreadyOff(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	c := connect(t, b)
	b.FailNext(ipmitest.PowerDown, 0xd5, false)
	require.NoError(t, c.Off(ctx, power.ModeHard), "refused as already off, and it reads off")
	assert.False(t, p.HardwareOn())

	b2, p2 := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	c2 := connect(t, b2)
	b2.FailNext(ipmitest.PowerDown, 0xd5, false)
	assert.ErrorIs(t, c2.Off(ctx, power.ModeHard), power.ErrUnsupported)
	assert.True(t, p2.HardwareOn())
}

// TestSoftShutdownUnreadIsTheReadError: when the state read before a soft
// shutdown fails, Off(soft) returns that read's class and status, and the
// host (off, ground truth) gets nothing.
func TestSoftShutdownUnreadIsTheReadError(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	c := connect(t, b)
	b.FailNext(ipmitest.Status, 0xce, false)
	err := c.Off(ctx, power.ModeSoft)
	require.ErrorIs(t, err, power.ErrBusy)
	var pe *power.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 0xce, pe.Status)
	assert.Equal(t, power.OpName(power.ModeSoft), pe.Op)
	assert.NotContains(t, b.Commands(), ipmitest.SoftOff)
	assert.False(t, p.HardwareOn())
}
