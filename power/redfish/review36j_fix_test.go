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

// TestLostResetWindowOutlivesLaterReset (review 36 round 10, with
// TestReview36j_AdapterResetWindowFromAbandonedPostReturn): a reset POST
// whose answer was lost may still be applied SoftTimeout after its return,
// whatever resets were answered since. Here a ForceOff's answer is lost at
// 0, a second ForceOff is answered at 5 s, someone powers the host on out
// of band at 6 s, the lost ForceOff lands at 45 s, and a press is asked at
// 50 s (reads 29 s old: On, an echo): it must not be sent. (With the lost
// POST's window dropped by the later answered reset, it was, 45 s after
// that reset, and powered the off host on.)
func TestLostResetWindowOutlivesLaterReset(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	ab := &abandonedPost{rt: r.srv.Client().Transport}
	r.cfg.HTTPClient = &http.Client{Transport: ab}
	c := r.connect(t)
	r.clk.Advance(time.Minute)
	start := r.clk.Real()
	require.Error(t, c.Off(ctx, power.ModeHard), "the setup: the first ForceOff's answer was lost")
	r.clk.Advance(5 * time.Second)
	require.NoError(t, c.Off(ctx, power.ModeHard))
	r.clk.Advance(time.Second)
	r.hw.OutOfBandOn()
	r.clk.Advance(start.Add(45 * time.Second).Sub(r.clk.Real()))
	ab.land(t)
	require.False(t, r.hw.HardwareOn(), "the setup: the lost ForceOff landed at 45 s")
	r.clk.Advance(5 * time.Second)
	perr := c.Off(ctx, power.ModeSoft)
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the adapter pressed the button (soft power-off answered %v) 50 s after a ForceOff whose answer was lost, its window dropped by a later answered reset: the host was powered on at %v; resets %v; truth %s",
				perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}
