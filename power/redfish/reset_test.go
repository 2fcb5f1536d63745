package redfish_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestResetRestartsWithoutPowerOff (issue 39, point 3): Reset is one
// ForceRestart to a system that reads On; the hardware never goes off
// (ground truth) and the emulator's hardware records one reset. A system
// that reads Off gets nothing (a restart may power it on), and one whose
// allowable types lack ForceRestart is unsupported.
func TestResetRestartsWithoutPowerOff(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	start := r.clk.Real()
	require.NoError(t, c.Reset(ctx))
	assert.Equal(t, []string{"ForceRestart"}, r.bmc.Resets())
	assert.Len(t, r.hw.Resets(), 1, "ground truth: the hardware was reset once")
	assert.False(t, r.hw.WasOffDuring(start, r.clk.Real()), "ground truth: never off")

	r.hw.OutOfBandOff()
	err := c.Reset(ctx)
	require.ErrorIs(t, err, power.ErrBusy)
	assert.Equal(t, []string{"ForceRestart"}, r.bmc.Resets(), "nothing sent to a system that reads Off")
	assert.False(t, r.hw.HardwareOn(), "not powered on")
	assert.Len(t, r.hw.Resets(), 1)

	// A BMC that refuses the reset: an error of its class, no reset.
	r.hw.OutOfBandOn()
	r.bmc.FailNextReset(http.StatusServiceUnavailable, false)
	require.ErrorIs(t, c.Reset(ctx), power.ErrBusy)
	assert.Len(t, r.hw.Resets(), 1)
}

// TestResetUnsupportedWithoutForceRestart: a system that offers no
// ForceRestart cannot be reset; PowerCycle is never taken instead (it
// powers off).
func TestResetUnsupportedWithoutForceRestart(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoForceRestart: true}, fake.PowerConfig{Lag: time.Second})
	c := r.connect(t)
	require.ErrorIs(t, c.Reset(ctx), power.ErrUnsupported)
	assert.Empty(t, r.bmc.Resets())
}
