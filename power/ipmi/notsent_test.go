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

// Review 36 round 2: a soft shutdown the adapter does not send because
// the state could not be read matches power.ErrNotSent (the reboot
// controller retries soft after RetryDelay, and counts no press); one
// whose command failed after it went out does not.
func TestUnreadSoftShutdownMatchesErrNotSent(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	b.FailNext(ipmitest.Status, 0xc0, false)
	err := c.Off(ctx, power.ModeSoft)
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.ErrorIs(t, err, power.ErrBusy)
	assert.NotContains(t, b.Commands(), ipmitest.SoftOff)
	assert.True(t, p.HardwareOn())

	b.FailNext(ipmitest.SoftOff, 0xc0, false)
	err = c.Off(ctx, power.ModeSoft)
	require.Error(t, err, "refused by the BMC after it went out")
	assert.NotErrorIs(t, err, power.ErrNotSent)
}
