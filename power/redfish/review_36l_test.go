package redfish_test

import (
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

// Review 36 round 12 (TestReview36l_LostLandingWindowDiesWithItsController):
// 7405882 blocks presses for LostLanding + SoftTimeout + StaleReads after
// a reset POST that got no HTTP answer, but keeps that instant in the
// Controller (redfish.go: lostReset, lastOffPush, fields of Controller),
// and Config.LostLanding promises "no PushPowerButton is sent within
// LostLanding + SoftTimeout + StaleReads of that return". The Pool, which
// every rebootctl/Reconciler wiring uses, makes a new Controller on every
// new login: after a refused re-login (ErrAuth retires the session,
// pool_call.go release), after a call it gave up on (abandonLocked), or
// after Pool.Forget. A Controller made on a new login of the same BMC
// knows nothing of the lost press, and presses at 211 s on an On read
// that echoes the OS still shutting down from it (landed 20 s late, OS
// 170 s, reads 29 s old): it powers the host on. The reboot package does
// not cover it either: it counts the lost press from its return for
// SoftTimeout + StaleReads only (TestReview36l_IPMILostSoftOffLandingLateThenSlowShutdown).
func TestReview36l_LostLandingWindowDiesWithItsController(t *testing.T) {
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
	r.clk.Advance(20 * time.Second)
	ab.land(t)
	require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets(), "the setup: the lost press landed 20 s after its return")
	r.clk.Advance(171 * time.Second)
	require.False(t, r.hw.HardwareOn(), "the setup: the OS shut down 170 s after the press landed")
	// The Pool's next login (its session was retired or abandoned) makes
	// a new Controller for the same BMC.
	c2 := r.connect(t)
	r.clk.Advance(start.Add(211 * time.Second).Sub(r.clk.Real()))
	perr := c2.Off(ctx, power.ModeSoft)
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("a Controller made on a new login of the same BMC pressed the button (soft power-off answered %v) within LostLanding + SoftTimeout + StaleReads of a lost press (applied 20 s after the POST returned, OS 170 s): the host was powered on at %v; resets %v; truth %s",
				perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}

func connectCfg(t *testing.T, cfg redfish.Config) *redfish.Controller {
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
