package redfish_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// abandonedPost: the first reset POST reaches the BMC, but its answer
// never comes back before the client gives up (a read timeout); the BMC
// applies it later, when the test calls land (a BMC that queues resets,
// as iDRAC's job queue does, or one slow to answer).
type abandonedPost struct {
	rt      http.RoundTripper
	pending *http.Request
	body    []byte
	done    bool
}

func (a *abandonedPost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") && !a.done {
		a.done = true
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		a.pending, a.body = r.Clone(r.Context()), b
		return nil, fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)
	}
	return a.rt.RoundTrip(r)
}

// land has the BMC apply the abandoned POST now.
func (a *abandonedPost) land(t *testing.T) {
	req := a.pending.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(a.body))
	resp, err := a.rt.RoundTrip(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// Review 36 round 10 (TestReview36j_AdapterResetWindowFromAbandonedPostReturn):
// 630a6e9 counts the StaleReads window after the adapter's own reset
// from when its POST returned, "the latest it may have reached the
// hardware" (redfish.go package doc and resetReturned). That holds only
// for a POST that was answered: one the client gave up on (a read
// timeout, the pass's or the pool's deadline) may still be applied by the
// BMC after the return, and reads then echo the state from before it
// until StaleReads after it landed. Here a ForceOff's answer times out
// (the BMC lists ForceOff and PushPowerButton, no GracefulShutdown), the
// BMC applies it 10 s after the adapter's return, reads are 29 s old: a
// soft power-off (a press) asked 31 s after that return reads On (an echo
// of the host before its ForceOff landed), passes the adapter's StaleReads
// check, and presses the button of a host that is off: it powers it on.
// The press rule already counts a press that timed out for the whole
// SoftTimeout + StaleReads; a reset whose answer was lost is not bounded
// at all.
func TestReview36j_AdapterResetWindowFromAbandonedPostReturn(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	cl := r.srv.Client()
	ab := &abandonedPost{rt: cl.Transport}
	r.cfg.HTTPClient = &http.Client{Transport: ab}
	c := r.connect(t)
	r.clk.Advance(time.Minute)
	start := r.clk.Real()
	err := c.Off(ctx, power.ModeHard)
	require.Error(t, err, "the setup: the ForceOff's answer was lost")
	require.NotNil(t, ab.pending)
	require.True(t, r.hw.HardwareOn(), "the setup: the ForceOff has not landed yet")
	r.clk.Advance(10 * time.Second)
	ab.land(t)
	require.Equal(t, []string{"ForceOff"}, r.bmc.Resets())
	require.False(t, r.hw.HardwareOn(), "the setup: the ForceOff landed 10 s after the adapter's return")
	r.clk.Advance(start.Add(31 * time.Second).Sub(r.clk.Real()))
	perr := c.Off(ctx, power.ModeSoft) // a press asked 31 s after the ForceOff's POST returned
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the adapter pressed the button (soft power-off answered %v) on a read that echoed the host before its own ForceOff landed, 10 s after its POST returned without an answer: the host was powered on at %v; resets %v; truth %s",
				perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}

// slowAnswer delays the answer of every GET of a system (its power
// state) by delay on the rig's clock after the BMC made it: a slow link,
// a TLS record stuck behind a retransmission, a BMC slow to send.
type slowAnswer struct {
	rt    http.RoundTripper
	clk   *fake.Clock
	delay time.Duration
	on    bool
}

func (s *slowAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if s.on && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/Systems/") {
		s.clk.Advance(s.delay)
	}
	return resp, err
}

// Review 36 round 10 (TestReview36j_AdapterResetWindowCheckedAfterTheRead):
// change checks the StaleReads window after the adapter's own reset
// against c.now() once its state read has returned (redfish.go change:
// `since := c.now().Sub(c.lastReset)` after readState), not against when
// that read began: a read begun within StaleReads of the reset may echo
// the state from before it, however late its answer arrives (A1: a
// reading shows the power at most StaleReads before the read; the reboot
// controller dates a reading by the clocks read before it). Here a
// ForceOff returns at 0 (the BMC lists ForceOff and PushPowerButton, no
// GracefulShutdown), reads are 29 s old, and a soft power-off (a press)
// is asked at 26 s: its read is made by the BMC at 26 s (an echo of the
// host on at -3 s) and its answer arrives 5 s later; the check, at 31 s,
// passes, and the press powers the off host on.
func TestReview36j_AdapterResetWindowCheckedAfterTheRead(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{NoGraceful: true},
		fake.PowerConfig{Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true}})
	cl := r.srv.Client()
	sa := &slowAnswer{rt: cl.Transport, clk: r.clk, delay: 5 * time.Second}
	r.cfg.HTTPClient = &http.Client{Transport: sa}
	c := r.connect(t)
	r.clk.Advance(time.Minute)
	start := r.clk.Real()
	require.NoError(t, c.Off(ctx, power.ModeHard))
	require.Equal(t, []string{"ForceOff"}, r.bmc.Resets())
	require.False(t, r.hw.HardwareOn(), "the setup: the ForceOff landed")
	r.clk.Advance(start.Add(26 * time.Second).Sub(r.clk.Real()))
	sa.on = true
	perr := c.Off(ctx, power.ModeSoft) // a press asked 26 s after the ForceOff; its read answers 5 s late
	sa.on = false
	r.clk.Advance(time.Minute)
	for _, tc := range r.hw.Truth() {
		if tc.On && tc.Cause == fake.CauseCommand && tc.At.After(start) {
			t.Fatalf("the adapter pressed the button (soft power-off answered %v) on a read begun 26 s after its own ForceOff (an echo of the host before it), checking StaleReads once the read's answer arrived: the host was powered on at %v; resets %v; truth %s",
				perr, tc.At.Sub(start), r.bmc.Resets(), rebootcheck.DescribeTruth(r.hw))
		}
	}
}
