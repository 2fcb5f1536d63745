package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// review36agSlowOn is a BMC whose power-on is a press of the power button
// (fake.ButtonAll: OnToggler) and whose On call is slow: its lock, login
// and state read come first, and the press reaches the hardware only as
// the call returns, `slow` after it was sent (a busy iLO takes tens of
// seconds). Everything else is the fake's.
type review36agSlowOn struct {
	*fake.Power
	clk  *fake.Clock
	slow time.Duration
}

func (s review36agSlowOn) On(ctx context.Context) error {
	s.clk.Advance(s.slow)
	return s.Power.On(ctx)
}

// TestReview36ag_SlowPowerOnPressPressedAgainOnEcho: issue 36 item 1 the
// other way round ("no toggle is ever sent unless a reading that cannot
// be an echo" shows the opposite state). doc.go: a power-on that may
// press "is sent only on an Off reading taken StaleReads after this
// controller's previous power-on", and A5: a call "counts from its
// return" (a press may reach the hardware at any time up to its return;
// power-offs are counted so, SinceOff/SincePress). But QuietFor, which
// onPressWait (toggle.go) reads, counts a power-on from Sending, before
// the call; an answered press is not counted at all in SincePress
// (sentOn). A host that is off, Online, on a press-only BMC whose On call
// takes 40 s (press landing at its return) and whose reads are 30 s old
// (StaleReads, the default): the controller presses at t0, the host
// powers on at t0+40 s, and at t0+45 s QuietFor is 45 s >= StaleReads,
// the reading (30 s old: t0+15 s) still says Off, and a second press
// shuts the host it just powered on down. Ground truth: once powered on
// by the controller, the Online host with no request is never powered
// off again.
func TestReview36ag_SlowPowerOnPressPressedAgainOnEcho(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: w.cfg.StaleReads, NoTransitioning: true}})
	// The first power-on press is carried out, and the BMC answers it
	// with an error (an HTTP 500 after the reset went through): answered,
	// so not lost (A5: it "counts from its return"), retried after
	// RetryDelay.
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultFailed, Applied: true})
	w.Power = review36agSlowOn{Power: pw, clk: clk, slow: 30 * time.Second}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(2*time.Minute), start)
	var firstOn time.Time
	for _, tr := range pw.Truth() {
		if tr.On {
			firstOn = tr.At
			break
		}
	}
	require.False(t, firstOn.IsZero(), "the setup: the controller powered the host on; truth %s", rebootcheck.DescribeTruth(pw))
	review36uLoop(t, rec, clk, start.Add(20*time.Minute), start)
	require.False(t, pw.WasOffDuring(firstOn, clk.Real()),
		"an Online host the controller powered on (a press landing as its slow call returned) was pressed off again by a second power-on press sent on an Off reading that echoes the state before the first (QuietFor counts from Sending, not the return); On calls %d; truth %s",
		review36xCount(pw, fake.OpOn, start), rebootcheck.DescribeTruth(pw))
}

// TestReview36ag_SlowAcceptedPowerOnPressPressedAgainOnEcho: as
// TestReview36ag_SlowPowerOnPressPressedAgainOnEcho with a press the
// BMC accepts, on a host whose reads are 90 s old (Host.StaleReads, a
// per-host bound larger than ReissueAfter: c.wait's ReissueAfter from the
// return then no longer covers for QuietFor counting from Sending). The
// press is sent at t0 and lands as its 5 s call returns; at t0+90 s
// QuietFor is 90 s >= StaleReads and the reading (90 s old: t0) says
// Off: a second press shuts down the host the first just powered on,
// and so on for ever (the host is power-cycled every 4 minutes).
func TestReview36ag_SlowAcceptedPowerOnPressPressedAgainOnEcho(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	w.store = fake.NewRebootHosts(reboot.Host{Name: "h", Online: true, StaleReads: 90 * time.Second})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 90 * time.Second, NoTransitioning: true}})
	w.Power = review36agSlowOn{Power: pw, clk: clk, slow: 5 * time.Second}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(3*time.Minute), start)
	var firstOn time.Time
	for _, tr := range pw.Truth() {
		if tr.On {
			firstOn = tr.At
			break
		}
	}
	require.False(t, firstOn.IsZero(), "the setup: the controller powered the host on; truth %s", rebootcheck.DescribeTruth(pw))
	review36uLoop(t, rec, clk, start.Add(20*time.Minute), start)
	require.False(t, pw.WasOffDuring(firstOn, clk.Real()),
		"an Online host the controller powered on (an accepted press landing as its slow call returned) was pressed off again by a second power-on press sent on an Off reading that echoes the state before the first; On calls %d; truth %s",
		review36xCount(pw, fake.OpOn, start), rebootcheck.DescribeTruth(pw))
}

// TestReview36ag_TrackerSlowAcceptedPowerOnPressPressedAgainOnEcho: as
// TestReview36ag_SlowAcceptedPowerOnPressPressedAgainOnEcho for a caller
// that runs Decide with a Tracker (kube's path): Tracker.Sending dates the
// power-on at its start (tracker.go, lastOn) and Sent does not move it to
// the return, so QuietFor again counts from before the press landed.
func TestReview36ag_TrackerSlowAcceptedPowerOnPressPressedAgainOnEcho(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true, StaleReads: 90 * time.Second})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 90 * time.Second, NoTransitioning: true}})
	pc := review36agSlowOn{Power: pw, clk: clk, slow: 5 * time.Second}
	tr := &reboot.Tracker{}
	start := clk.Real()
	for clk.Real().Before(start.Add(20 * time.Minute)) {
		d, err := trackerPass(ctx, tr, cfg, hosts, pc, clk.Now, clk.Monotonic, "h")
		require.NoError(t, err)
		clk.Advance(min(max(d.RequeueAfter, time.Second), 30*time.Second))
	}
	var firstOn time.Time
	for _, tc := range pw.Truth() {
		if tc.On {
			firstOn = tc.At
			break
		}
	}
	require.False(t, firstOn.IsZero(), "the setup: the host was powered on; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.WasOffDuring(firstOn, clk.Real()),
		"Tracker: an Online host powered on by an accepted press (landing as its 5 s call returned) was pressed off again on an Off echo; On calls %d; truth %s",
		review36xCount(pw, fake.OpOn, start), rebootcheck.DescribeTruth(pw))
}
