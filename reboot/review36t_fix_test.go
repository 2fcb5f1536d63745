package reboot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36tFix_HeldBackSoftRebootTriedSoftFirst: a soft reboot whose
// soft power-off the controller's own waits hold back past SoftTimeout
// from the request (a restart finds an earlier press's LastPress: it may
// still land, landWait, and start a shutdown, pressWait) is tried soft
// once they are over, and falls back to hard only SoftTimeout after that
// soft power-off (Status.SoftSince), counted on the fake's own call log.
// Before: SoftTimeout counted from PendingRebootSince ran out while the
// soft press was held back, and the first power-off sent was hard.
func TestReview36tFix_HeldBackSoftRebootTriedSoftFirst(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	// An OS that ignores the soft press: only the hard fallback powers
	// the host off.
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, IgnoreSoft: true,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	clk.Advance(time.Hour)
	t0 := clk.Now().Truncate(time.Second)
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: ""},
		Status: reboot.Status{PendingRebootSince: t0.Add(-200 * time.Second), Mode: power.ModeSoft, Works: 2,
			LastPress: t0.Add(-250 * time.Second), Format: reboot.StatusFormat}})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	review36RunUntilOff(t, clk, rec, pw, start, 15*time.Minute, true)
	offs := review36OffCalls(pw)
	require.NotEmpty(t, offs, "no power-off in 15 minutes; truth %s", rebootcheck.DescribeTruth(pw))
	require.Equal(t, power.ModeSoft, offs[0].Mode,
		"the first power-off of a soft reboot held back by the controller's own wait (%v after the restart) is hard: SoftTimeout counted from the request ran out during the wait, the soft shutdown was never tried; truth %s",
		offs[0].At.Sub(start), rebootcheck.DescribeTruth(pw))
	require.GreaterOrEqual(t, offs[0].At.Sub(start), reboot.LostLandingOf(cfg), "the setup: the restart held the power-off back")
	hard := review36FirstHard(offs)
	require.NotNil(t, hard, "the soft reboot of an OS that ignores the press never fell back to hard; truth %s", rebootcheck.DescribeTruth(pw))
	require.GreaterOrEqual(t, hard.At.Sub(offs[0].At), cfg.SoftTimeout,
		"hard fallback %v after the first soft power-off: less than SoftTimeout", hard.At.Sub(offs[0].At))
	require.Less(t, hard.At.Sub(offs[0].At), cfg.SoftTimeout+cfg.StaleReads+15*time.Second,
		"hard fallback %v after the first soft power-off: SoftTimeout counts from it", hard.At.Sub(offs[0].At))
	require.True(t, pw.WasOffDuring(start, clk.Real()), "truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview36tFix_UnknownReadingsStillFallBackToHard: a soft reboot on a
// BMC whose soft power-off presses and whose readings stay unknown (the
// press cannot go out: no On reading) still falls back to a forced
// power-off SoftTimeout after the request (issue 36: a power-off that
// sets the power is sent whatever the reading), and no soft power-off
// was ever sent (the fake's call log).
func TestReview36tFix_UnknownReadingsStillFallBackToHard(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft,
		Report: fake.Report{Unknown: 1, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	clk.Advance(time.Minute)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Annotations = map[string]string{reboot.Annotation: ""} }))
	start := clk.Real()
	review36RunUntilOff(t, clk, rec, pw, start, 10*time.Minute, false)
	offs := review36OffCalls(pw)
	require.NotEmpty(t, offs, "unknown readings: no power-off in 10 minutes; truth %s", rebootcheck.DescribeTruth(pw))
	require.Equal(t, power.ModeHard, offs[0].Mode, "a press sent on unknown readings; truth %s", rebootcheck.DescribeTruth(pw))
	require.GreaterOrEqual(t, offs[0].At.Sub(start), cfg.SoftTimeout-cfg.Precision)
	require.Less(t, offs[0].At.Sub(start), cfg.SoftTimeout+15*time.Second, "the hard fallback came late")
}

// TestReview36tFix_HeldBackOfflineTriedSoftFirst: the same for an
// Online=false enforcement (Status.OfflineSoftSince): held back past
// SoftTimeout from OfflineSince by a restart's wait for an earlier press
// (LastPress), its first power-off is soft, and the hard fallback comes
// SoftTimeout after it (the fake's call log). Before: OfflineMode turned
// hard at OfflineSince + SoftTimeout while the soft press was held back.
func TestReview36tFix_HeldBackOfflineTriedSoftFirst(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, IgnoreSoft: true,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	clk.Advance(time.Hour)
	t0 := clk.Now().Truncate(time.Second)
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false,
		Status: reboot.Status{OfflineSince: t0.Add(-200 * time.Second), OfflineMode: power.ModeSoft, Works: 2,
			LastPress: t0.Add(-250 * time.Second), Format: reboot.StatusFormat}})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	review36RunUntilOff(t, clk, rec, pw, start, 15*time.Minute, true)
	offs := review36OffCalls(pw)
	require.NotEmpty(t, offs, "no power-off in 15 minutes; truth %s", rebootcheck.DescribeTruth(pw))
	require.Equal(t, power.ModeSoft, offs[0].Mode,
		"the first power-off of an Online=false enforcement held back by the controller's own wait (%v after the restart) is hard: SoftTimeout counted from OfflineSince ran out during the wait; truth %s",
		offs[0].At.Sub(start), rebootcheck.DescribeTruth(pw))
	hard := review36FirstHard(offs)
	require.NotNil(t, hard, "never fell back to hard; truth %s", rebootcheck.DescribeTruth(pw))
	require.GreaterOrEqual(t, hard.At.Sub(offs[0].At), cfg.SoftTimeout)
	require.Less(t, hard.At.Sub(offs[0].At), cfg.SoftTimeout+cfg.StaleReads+15*time.Second)
}
