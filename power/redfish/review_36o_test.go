package redfish_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 36 round 15 (TestReview36o_GatewayTimeoutPressKeepsLostWindow):
// round 14 made HTTP 502 and 504 "no answer" (reboot/outcome.go
// unknownStatus: a gateway in front of the BMC has no outcome, the reset
// may still be carried out, A5), but the adapter's own lost-reset window
// (resetReturned: `pe != nil && pe.Status == 0`) still counts only a POST
// with no status: a PushPowerButton answered 504 opens just the
// SoftTimeout + StaleReads press window, not LostLanding + SoftTimeout +
// StaleReads. Here the BMC behind the gateway carries the press out 20 s
// after the 504 (within LostLanding), the OS shuts down in 175 s (within
// SoftTimeout), reads are 29 s old; a caller that repeats the soft
// power-off (rebootctl, a script, any caller but the reboot Reconciler)
// gets a press sent 210 s after the 504, on an echo: the host, off since
// 195 s, powers on.
func TestReview36o_GatewayTimeoutPressKeepsLostWindow(t *testing.T) {
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout} {
		r := newRig(t, redfishtest.Quirks{NoGraceful: true},
			fake.PowerConfig{SoftDelay: 175 * time.Second, Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
		c := r.connect(t)
		require.True(t, c.TogglesOff(power.ModeSoft), "soft power-off is a press here")
		start := r.clk.Real()
		r.bmc.FailNextReset(status, false)
		err := c.Off(ctx, power.ModeSoft)
		require.Error(t, err)
		back := r.clk.Real()
		landed := false
		for i := 0; i < 420; i++ {
			r.clk.Advance(time.Second)
			if !landed && r.clk.Real().Sub(back) >= 20*time.Second {
				landed = true
				require.NoError(t, r.hw.Off(ctx, power.ModeSoft)) // the BMC carries out the press
			}
			_ = c.Off(ctx, power.ModeSoft)
			for _, tc := range r.hw.Truth() {
				if tc.On && tc.At.After(start) {
					t.Fatalf("HTTP %d: a press answered %d by the gateway, carried out 20 s later (within LostLanding), and a repeated soft power-off pressed again on an echo, %v after the first returned: the host, off, powered on (resets %v)",
						status, status, tc.At.Sub(back), r.bmc.Resets())
				}
			}
		}
		require.False(t, r.hw.HardwareOn())
	}
}
