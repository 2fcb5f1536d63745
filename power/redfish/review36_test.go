package redfish_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 36 finding 5: a press refused for its credentials (the session
// expired and the new login was refused: a password rotation in progress)
// was not carried out, so it must not start the adapter's press window:
// once the credentials work again the soft power-off is sent, not refused
// as busy until SoftTimeout + StaleReads.
func TestReview36_RefusedPressStartsNoWindow(t *testing.T) {
	tried := 0
	for n := 1; n <= 12; n++ {
		r := newRig(t, redfishtest.Quirks{NoGraceful: true, SessionRequests: n}, fake.PowerConfig{})
		c, err := redfish.Connect(ctx, r.cfg)
		if err != nil {
			continue
		}
		r.bmc.SetCredentials("admin", "rotated")
		err = c.Off(ctx, power.ModeSoft)
		if err == nil || !errors.Is(err, power.ErrAuth) || len(r.bmc.Resets()) > 0 {
			_ = c.Close()
			continue // the session did not expire in this call
		}
		tried++
		// The session expired at the state read or at the POST; either
		// way nothing was pressed. Past StaleReads (the adapter's own
		// bound after any reset it posted), the press must go out.
		r.bmc.SetCredentials("admin", secret)
		r.clk.Advance(31 * time.Second)
		require.NoError(t, c.Off(ctx, power.ModeSoft), "session expiring after %d requests: the press goes out once the credentials work", n)
		require.Equal(t, []string{"PushPowerButton"}, r.bmc.Resets())
		_ = c.Close()
	}
	require.GreaterOrEqual(t, tried, 2, "the session expired at the state read and at the POST")
}

// Review 36 findings 3/4 at the adapter: once a read begun StaleReads
// after a press showed Off (the press's shutdown over), a press for a
// power-off is refused only within StaleReads of that read, not for the
// whole SoftTimeout + StaleReads: a held host powered on out of band is
// powered off again.
func TestReview36_AdapterPressWindowClosesOnOffRead(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{SoftDelay: 20 * time.Second})
	c := r.connect(t)
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	r.clk.Advance(31 * time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s)
	r.clk.Advance(31 * time.Second)
	r.hw.OutOfBandOn()
	require.NoError(t, c.Off(ctx, power.ModeSoft), "62 s after the press, 31 s after the Off read")
	require.Equal(t, []string{"PushPowerButton", "PushPowerButton"}, r.bmc.Resets())
	r.clk.Advance(21 * time.Second)
	require.False(t, r.hw.HardwareOn())
}

// Review 36 round 2 (TestReview36_EarlyOffEndsPressWindow at the
// adapter): with Config.OffSettle, one Off read does not show a press's
// shutdown over (a BMC may say Off up to OffSettle early); an unbroken
// run of Off reads OffSettle long does.
func TestPressWindowNeedsOffSettleRun(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true}, fake.PowerConfig{SoftDelay: 20 * time.Second})
	r.cfg.OffSettle = 10 * time.Second
	c := r.connect(t)
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	r.clk.Advance(31 * time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s)
	r.clk.Advance(31 * time.Second)
	r.hw.OutOfBandOn()
	err = c.Off(ctx, power.ModeSoft)
	require.ErrorIs(t, err, power.ErrNotSent, "one Off read, 31 s ago: the shutdown is not shown over")
	require.Len(t, r.bmc.Resets(), 1)

	// Off reads 31 s and 41 s after a press: a run OffSettle long.
	r.clk.Advance(4 * time.Minute)
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	require.Len(t, r.bmc.Resets(), 2)
	for _, d := range []time.Duration{31 * time.Second, 10 * time.Second} {
		r.clk.Advance(d)
		s, err := c.State(ctx)
		require.NoError(t, err)
		require.Equal(t, power.StateOff, s)
	}
	r.clk.Advance(31 * time.Second)
	r.hw.OutOfBandOn()
	require.NoError(t, c.Off(ctx, power.ModeSoft), "31 s after the run of Off reads ended")
	require.Len(t, r.bmc.Resets(), 3)
}
