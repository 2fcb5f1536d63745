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

// Issue 36, point 6: on a BMC with no graceful reset type, a soft
// power-off is PushPowerButton. The OS takes 45 s to shut down and the BMC
// reads 20 s late: a second soft power-off 60 s after the first (the
// reboot controller's ReissueAfter) read On, an echo, and the old adapter
// pressed the button of a host that was off by then, powering it on. No
// press for a power-off may go out within SoftTimeout + StaleReads of the
// previous one.
func TestIssue36SoftPressNeverPowersOn(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{SoftDelay: 45 * time.Second, Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}})
	c := r.connect(t)
	require.True(t, c.TogglesOff(power.ModeSoft), "soft power-off is a press here")
	require.False(t, c.TogglesOff(power.ModeHard), "ForceOff sets the power")
	require.False(t, c.TogglesOn(), "On sets the power")
	start := r.clk.Real()
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	var refused int
	for i := 0; i < 20; i++ {
		r.clk.Advance(10 * time.Second)
		if err := c.Off(ctx, power.ModeSoft); err != nil {
			assert.ErrorIs(t, err, power.ErrBusy, "not sent: busy, try again later")
			refused++
		}
		for _, tc := range r.hw.Truth() {
			if tc.On && !tc.At.Before(start) {
				t.Fatalf("the soft power-off pressed the button of a host that was off, %v after the first press", tc.At.Sub(start))
			}
		}
	}
	assert.Positive(t, refused)
	assert.False(t, r.hw.HardwareOn())

	// A BMC with GracefulShutdown sets the power: no toggle, and the soft
	// power-off is sent whatever the host reads, Off included (it powers
	// nothing on), as reboot's doc says.
	g := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{Initial: power.StateOff})
	gc := g.connect(t)
	assert.False(t, gc.TogglesOff(power.ModeSoft))
	assert.False(t, gc.TogglesOff(power.ModeHard))
	require.NoError(t, gc.Off(ctx, power.ModeSoft))
	assert.Equal(t, []string{"GracefulShutdown"}, g.bmc.Resets())
	assert.False(t, g.hw.HardwareOn())
}
