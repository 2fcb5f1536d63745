package reboot_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// countingNoHardOff is noHardOff counting the hard power-offs asked.
type countingNoHardOff struct {
	noHardOff
	hard *int
}

func (n countingNoHardOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		*n.hard++
	}
	return n.noHardOff.Off(ctx, m)
}

// Review 36 round 3 (with TestReview36_HoldBreakHardUnsupportedNeverPowersOff):
// a hard reboot on a BMC that offers no hard power-off is not left
// unanswered: the power-off goes out soft, with an ErrNoHardPowerOff
// warning, and hard is asked again only every ReissueAfter, not every
// pass. (Before: hard asked in every pass, the host never powered off,
// the request never answered.)
func TestHardUnsupportedRebootFallsBackToSoft(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second, Lag: time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	hard := 0
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return countingNoHardOff{noHardOff{pw}, &hard}, nil }}
	warned := false
	run := func(limit time.Duration) {
		for end := clk.Real().Add(limit); clk.Real().Before(end); {
			res, err := r.Reconcile(ctx, "h")
			require.NoError(t, err)
			warned = warned || slices.ContainsFunc(res.Decision.Warnings, func(w error) bool { return errors.Is(w, reboot.ErrNoHardPowerOff) })
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = 10 * time.Millisecond
			}
			clk.Advance(next)
		}
	}
	run(time.Minute)
	c := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	start := clk.Real()
	tk, err := c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	run(2 * time.Minute)
	f, err := c.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, f, "hard reboot on a BMC without a hard power-off not fenced; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.WasOffDuring(start, clk.Real()))
	require.True(t, warned, "no ErrNoHardPowerOff warning")
	cfg := reboot.DefaultConfig()
	require.LessOrEqual(t, hard, int(2*time.Minute/cfg.ReissueAfter)+1, "hard power-off asked again before ReissueAfter")
	require.NoError(t, c.Release(ctx, tk))
	run(time.Minute)
	require.True(t, pw.HardwareOn())
}

// Online=false past SoftTimeout wants hard; within ReissueAfter of an
// unsupported answer it is sent soft with a warning, then hard is tried
// again.
func TestHardUnsupportedOfflineSendsSoft(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	o := reboot.Observed{Online: false, Power: power.StateOn, QuietFor: time.Hour, SinceOff: time.Hour, SincePress: time.Hour,
		Status:            reboot.Status{OfflineSince: now.Add(-5 * time.Minute), OfflineMode: power.ModeHard},
		LastCall:          reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, Class: power.ClassUnsupported, At: now.Add(-time.Second)},
		HardUnsupportedAt: now.Add(-time.Second)}
	d := reboot.Decide(o, now)
	require.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	require.Equal(t, power.ModeSoft, d.Mode, d.Reason)
	require.True(t, slices.ContainsFunc(d.Warnings, func(w error) bool { return errors.Is(w, reboot.ErrNoHardPowerOff) }), "%v", d.Warnings)
	require.Equal(t, power.ModeHard, d.Status.OfflineMode, "the wanted mode stays hard")

	o.LastCall = reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, At: now.Add(-61 * time.Second)}
	o.HardUnsupportedAt = now.Add(-62 * time.Second)
	d = reboot.Decide(o, now)
	require.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	require.Equal(t, power.ModeHard, d.Mode, "hard asked again ReissueAfter after the unsupported answer: %s", d.Reason)
	require.Empty(t, d.Warnings)
}
