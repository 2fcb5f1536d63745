package redfish_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 36 round 13 (TestReview36m_LostWindowEvictedByOtherBMCs):
// 01945a3 keeps the lost-reset window per endpoint and system in a
// package registry bounded at 4096 entries (lost.go: lostWindows
// max 4096); once full, note drops "the entry whose window ends first",
// even if that window is still open. Config.LostLanding promises "no
// PushPowerButton is sent within LostLanding + SoftTimeout + StaleReads
// of that return, ... by this Controller or any other for the same
// Endpoint and system in this process". One process drives a fleet
// (issue 37: 100,000 servers, 5 % at a time: 5,000 reboots in flight);
// a BMC network outage during a wave loses the answers of more than 4,096
// resets within seconds. Here the lost press of our system is followed,
// 1 s later, by lost resets of 4,096 other BMCs (their windows end 1 s
// after ours): ours is evicted while open, and a Controller made on the
// Pool's next login of our BMC presses at 211 s on an On read echoing the
// OS still shutting down from the lost press (landed 20 s late, OS 170 s,
// reads 29 s old): the host is powered on. The fix: never evict an entry
// whose window is open (grow, or refuse presses for a key that may have
// been evicted, e.g. keep a floor "any window evicted until T" per
// process), and drop expired entries.
func TestReview36m_LostWindowEvictedByOtherBMCs(t *testing.T) {
	t.Cleanup(redfish.ResetLostWindows36m)
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{SoftDelay: 170 * time.Second, Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	ab := &abandonedPost{rt: r.srv.Client().Transport}
	cfg1 := r.cfg
	cfg1.HTTPClient = &http.Client{Transport: ab}
	r.clk.Advance(time.Minute)
	c1 := connectCfg(t, cfg1)
	start := r.clk.Real()
	require.Error(t, c1.Off(ctx, power.ModeSoft), "the setup: the press's answer was lost")
	require.NotNil(t, ab.pending)
	// 4,096 other BMCs' resets lose their answers 1 s later (the same
	// outage), each recorded as resetReturned does.
	window := 180*time.Second + 180*time.Second + 30*time.Second
	other := start.Add(time.Second)
	for i := 0; i < redfish.WindowsMax36m(); i++ { // (the registry's bound, once 4,096)
		redfish.NoteLostReset36m(fmt.Sprintf("https://bmc-%d.example", i), "/redfish/v1/Systems/1", other, other.Add(window))
	}
	r.clk.Advance(20 * time.Second)
	ab.land(t)
	require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets(), "the setup: the lost press landed 20 s after its return")
	r.clk.Advance(171 * time.Second)
	require.False(t, r.hw.HardwareOn(), "the setup: the OS shut down 170 s after the press landed")
	c2 := r.connect(t) // the Pool's next login of the same BMC
	r.clk.Advance(start.Add(211 * time.Second).Sub(r.clk.Real()))
	perr := c2.Off(ctx, power.ModeSoft)
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the lost press's window (open until %v) was evicted from the registry by 4,096 other BMCs' lost resets: a Controller on a new login pressed at 211 s (answered %v) and powered the host on at %v; resets %v; truth %s",
				window, perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}
