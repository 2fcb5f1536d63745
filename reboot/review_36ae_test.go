package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36ae_SoftIgnoredStuckTransitioningFallsBackHard: doc.go:
// soft "falls back to hard Config.SoftTimeout (180 s) after its first
// soft power-off". A bare soft reboot; from the request on the BMC reads
// Transitioning whatever the power (alwaysTransitioning), and the OS
// ignores the ACPI power button (fake IgnoreSoft). The host must go off
// (the hard fallback) within SoftTimeout + StaleReads + slack of the
// request: ground truth (passes; coverage).
func TestReview36ae_SoftIgnoredStuckTransitioningFallsBackHard(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ``}
	}))
	arm.Store(true)
	review36uLoop(t, rec, clk, at.Add(60*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	bound := w.cfg.SoftTimeout + w.cfg.StaleReads + 2*w.cfg.PollInterval
	require.True(t, pw.WasOffDuring(at, at.Add(bound)),
		"a bare soft reboot, the OS ignoring ACPI, the BMC reading Transitioning: the host never went off within %v of the request (hard power-offs in the hour %d); status %+v; truth %s",
		bound, review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ae_GaveUpLongRunOutOfBandOffOffAnHour: doc.go, Unknown:
// "a host with Online true and no hold whose readings say Transitioning
// for that long is powered on the same way" as a held host is powered
// off: "again every twice SoftTimeout + StaleReads while the run lasts";
// the give-up "on Transitioning readings the power-on that sets the
// power is sent again as idle sends it". bareStuck gave up (the BMC reads
// Transitioning whatever the power), the run goes on for two hours, then
// the host is powered off out of band (A2). It must be powered on again
// within about twice SoftTimeout + StaleReads: ground truth.
func TestReview36ae_GaveUpLongRunOutOfBandOffOffAnHour(t *testing.T) {
	w, rec, pw, at := review36adGaveUp(t)
	review36uLoop(t, rec, w.clk, at.Add(2*time.Hour), at)
	// Right after one of the give-up's power-ons (the worst case).
	for n := review36xCount(pw, fake.OpOn, at); review36xCount(pw, fake.OpOn, at) == n; {
		review36uLoop(t, rec, w.clk, w.clk.Real().Add(time.Second), at)
	}
	pw.OutOfBandOff()
	oob := w.clk.Real()
	bound := 2*(w.cfg.SoftTimeout+w.cfg.StaleReads) + 2*w.cfg.PollInterval
	review36uLoop(t, rec, w.clk, oob.Add(70*time.Minute), at)
	var backOn time.Time
	for _, tc := range pw.Truth() {
		if tc.On && tc.At.After(oob) {
			backOn = tc.At
			break
		}
	}
	h, err := w.store.Get(context.Background(), "h")
	require.NoError(t, err)
	require.False(t, backOn.IsZero(), "never powered on again; truth %s", rebootcheck.DescribeTruth(pw))
	require.LessOrEqual(t, backOn.Sub(oob), bound,
		"Online true, no hold, given-up bare reboot, powered off out of band 2 h into the Transitioning run: off for %v (doc: powered on again every twice SoftTimeout + StaleReads); status %+v",
		backOn.Sub(oob), h.Status)
}

// TestReview36ae_IdleLongRunOutOfBandOffOffAnHour: the same without a
// reboot (the root cause is idle's rule, which the give-up reuses):
// Online true, no request, the BMC reading Transitioning whatever the
// power for two hours; the host powered off out of band right after one
// of idle's power-ons stays off about an hour, where doc.go says such a
// host "is powered on the same way", "again every twice SoftTimeout +
// StaleReads while the run lasts".
func TestReview36ae_IdleLongRunOutOfBandOffOffAnHour(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	arm.Store(true)
	pw.OutOfBandOff() // the first power-on of the run
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(2*time.Hour), at)
	for n := review36xCount(pw, fake.OpOn, at); review36xCount(pw, fake.OpOn, at) == n; {
		review36uLoop(t, rec, clk, clk.Real().Add(time.Second), at)
	}
	pw.OutOfBandOff()
	oob := clk.Real()
	review36uLoop(t, rec, clk, oob.Add(70*time.Minute), at)
	var backOn time.Time
	for _, tc := range pw.Truth() {
		if tc.On && tc.At.After(oob) {
			backOn = tc.At
			break
		}
	}
	require.False(t, backOn.IsZero(), "never powered on again; truth %s", rebootcheck.DescribeTruth(pw))
	bound := 2*(w.cfg.SoftTimeout+w.cfg.StaleReads) + 2*w.cfg.PollInterval
	require.LessOrEqual(t, backOn.Sub(oob), bound,
		"Online true, no request, powered off out of band 2 h into a Transitioning run: off for %v (power-ons in the run %d)",
		backOn.Sub(oob), review36xCount(pw, fake.OpOn, at))
}
