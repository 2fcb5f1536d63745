package redfish_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 36 round 11 (TestReview36k_LostPressLandingLateThenSlowShutdown):
// a reset POST that got no HTTP answer blocks toggles for SoftTimeout +
// StaleReads after its return (redfish.go resetQuiet, resetReturned), and
// a press that timed out for the same window after its return
// (lastOffPush = c.now() in change). That window is right for a lost
// ForceOff the BMC applies up to SoftTimeout late, and for a press the
// BMC applied by the return whose OS takes up to SoftTimeout to shut
// down, but not for both at once: a lost press the BMC applies x late
// leaves the OS shutting down until x + SoftTimeout, and reads echo On
// until StaleReads after that. Here (no GracefulShutdown, so a soft
// power-off is a press) the press's answer is lost at 0, the BMC applies
// it 20 s later (well within the SoftTimeout the doc grants a lost POST),
// the OS takes 170 s (< SoftTimeout 180 s) to shut down: the hardware is
// off at 190 s, reads are 29 s old (< StaleReads 30 s). A soft power-off
// asked at 211 s reads On (an echo of 182 s), is past every window, and
// presses the button of a host that is off: it powers it on.
func TestReview36k_LostPressLandingLateThenSlowShutdown(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{SoftDelay: 170 * time.Second, Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	ab := &abandonedPost{rt: r.srv.Client().Transport}
	r.cfg.HTTPClient = &http.Client{Transport: ab}
	c := r.connect(t)
	r.clk.Advance(time.Minute)
	start := r.clk.Real()
	require.Error(t, c.Off(ctx, power.ModeSoft), "the setup: the press's answer was lost")
	require.NotNil(t, ab.pending)
	r.clk.Advance(20 * time.Second)
	ab.land(t)
	require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets(), "the setup: the lost press landed 20 s after its return")
	r.clk.Advance(171 * time.Second)
	require.False(t, r.hw.HardwareOn(), "the setup: the OS shut down 170 s after the press landed")
	r.clk.Advance(start.Add(211 * time.Second).Sub(r.clk.Real()))
	perr := c.Off(ctx, power.ModeSoft)
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the adapter pressed the button (soft power-off answered %v) on an On read that echoed a host still shutting down from its own lost press (applied 20 s after the POST returned, OS 170 s): the host was powered on at %v; resets %v; truth %s",
				perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}
