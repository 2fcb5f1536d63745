package redfish_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 36 round 2: the adapter's own refusals of a press, before
// anything is sent, match power.ErrNotSent (the reboot controller then
// counts the call as not carried out and retries soft after RetryDelay,
// instead of waiting for a press that never happened); a press that went
// out does not.
func TestRefusedPressMatchesErrNotSent(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{SoftDelay: 45 * time.Second})
	c := r.connect(t)
	require.NoError(t, c.Off(ctx, power.ModeSoft), "the host reads On: pressed")
	require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets())
	r.clk.Advance(10 * time.Second)
	err := c.Off(ctx, power.ModeSoft)
	require.Error(t, err, "the OS may still shut down: no second press")
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.ErrorIs(t, err, power.ErrBusy)
	assert.Len(t, r.bmc.Resets(), 1)

	r.srv.Close() // the state cannot be read
	err = c.Off(ctx, power.ModeSoft)
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrNotSent, "no press without a reading: %v", err)
	assert.Len(t, r.bmc.Resets(), 1)
}
