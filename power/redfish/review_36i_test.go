package redfish_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// slowPost delays every reset POST by delay on the rig's clock before the
// BMC applies it: a slow BMC that takes the reset long after the request
// began (a busy BMC's queue, a TLS renegotiation, a proxy).
type slowPost struct {
	rt    http.RoundTripper
	clk   *fake.Clock
	delay time.Duration
}

func (s slowPost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
		s.clk.Advance(s.delay)
	}
	return s.rt.RoundTrip(r)
}

// Review 36 round 9 (TestReview36i_AdapterResetWindowCountsFromPostStart):
// the adapter promises (redfish.go package doc, Config.StaleReads) that
// PushPowerButton is "not within Config.StaleReads of this Controller's
// previous reset (the read may echo the state from before it)", and
// reboot/doc.go lists it among the presses the adapters skip on their own
// reading. But change sets c.lastReset = c.now() before the POST
// (redfish.go change: `c.lastReset = c.now()` then withSession(Post)),
// the same mistake 9a4a9a6 fixed in the reboot controller for presses:
// a reset reaches the BMC at any time up to the POST's return. Here a
// ForceOff (hard power-off, not a press: the BMC lists ForceOff and
// PushPowerButton, no GracefulShutdown) is applied 25 s after its POST
// began; reads are 29 s old. A soft power-off (a press) asked 31 s after
// that POST began reads On (an echo of the host before the ForceOff
// landed), passes the adapter's StaleReads check, and presses the button
// of a host that is off: it powers it on.
func TestReview36i_AdapterResetWindowCountsFromPostStart(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	cl := r.srv.Client()
	r.cfg.HTTPClient = &http.Client{Transport: slowPost{rt: cl.Transport, clk: r.clk, delay: 25 * time.Second}}
	c := r.connect(t)
	r.clk.Advance(time.Minute)
	start := r.clk.Real()
	require.NoError(t, c.Off(ctx, power.ModeHard))
	require.Equal(t, []string{"ForceOff"}, r.bmc.Resets())
	require.False(t, r.hw.HardwareOn(), "the setup: the ForceOff landed")
	r.clk.Advance(start.Add(31 * time.Second).Sub(r.clk.Real()))
	_ = c.Off(ctx, power.ModeSoft) // a press asked 31 s after the last reset's POST began
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the adapter pressed the button on a read that echoed the host before its own ForceOff landed (counted StaleReads from the POST's start), powering the host on at %v; resets %v; truth %s",
				tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}
