package reboot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36oFix_StandbyBoundCheckedOnceLeading: a standby that reads a
// Status.ActingSince counts the power-offs the status shows from it, not
// from its leadership (TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots);
// but another leader may decide a power-off after that read, clearing
// ActingSince in the write before it: the first pass once leading that
// reads a changed ActingSince counts what the status shows as sent then
// (plus LostLanding, A5), as a standby pass would.
func TestReview36oFix_StandbyBoundCheckedOnceLeading(t *testing.T) {
	cfg := reboot.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := reboot.Host{Name: "h", Online: true, Annotations: map[string]string{reboot.Annotation: ""},
		// Format: an ActingSince of an older format bounds nothing
		// (TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress).
		Status: reboot.Status{PendingRebootSince: t0.Add(10 * time.Second), ActingSince: t0.Add(20 * time.Second),
			Format: reboot.StatusFormat}}
	for _, changed := range []bool{false, true} {
		tr := reboot.NewTracker(0, t0)
		tr.Standby()
		h := base
		h.Version = "1"
		tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: t0.Add(100 * time.Second), Mono: 100 * time.Second,
			SoftToggles: true, HardToggles: true}, cfg)
		tr.Leading(110 * time.Second)
		if changed {
			// Another leader decided a (forced) power-off between the read
			// and the leadership: its write cleared ActingSince.
			h.Status.ActingSince, h.Version = time.Time{}, "2"
		}
		o := tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: t0.Add(111 * time.Second), Mono: 111 * time.Second,
			SoftToggles: true, HardToggles: true}, cfg)
		lost := reboot.LostLandingOf(cfg)
		if changed {
			require.LessOrEqual(t, o.SinceOff, -lost, "another leader's power-off decided after the standby's read counts from the first leading pass")
		} else {
			// ActingSince + Precision = 21 s: counted from there.
			require.Equal(t, 111*time.Second-21*time.Second-lost, o.SinceOff, "the calls the status shows count from its ActingSince + Precision")
		}
	}
}

// TestReview36oFix_RestartsAndHiccupsAtAnyPeriodReboot: with
// Status.ActingSince bounding the calls a restart or a new leadership
// counts, a bare reboot of a host whose BMC only presses is carried out
// with the controller restarted, or its Hold refused once, every minute
// (shorter than the press wait itself, LostLanding + SoftTimeout +
// StaleReads), the first press answered 409 busy.
func TestReview36oFix_RestartsAndHiccupsAtAnyPeriodReboot(t *testing.T) {
	for _, hiccup := range []bool{false, true} {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := reboot.DefaultConfig()
		pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
			Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
		g := &hiccupGuard{}
		newRec := func() *reboot.Reconciler {
			return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: g,
				Power: func(string) (power.Controller, error) { return pw, nil }}
		}
		rec := newRec()
		clk.Advance(10 * time.Minute)
		requestAt := clk.Real()
		pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
		require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
			h.Annotations = map[string]string{reboot.Annotation: ""}
		}))
		restartAt, end := requestAt.Add(10*time.Second), requestAt.Add(15*time.Minute)
		for clk.Real().Before(end) && !pw.WasOffDuring(requestAt, clk.Real()) {
			if !clk.Real().Before(restartAt) {
				restartAt = clk.Real().Add(time.Minute)
				if hiccup {
					g.refuse = 1
				} else {
					rec = newRec()
				}
			}
			res, err := rec.Reconcile(ctx, "h")
			if !errors.Is(err, reboot.ErrNotLeader) {
				require.NoError(t, err)
			}
			next := res.RequeueAfter
			if res.Requeue || next <= 0 {
				next = time.Second
			}
			clk.Advance(max(min(next, 10*time.Second, restartAt.Sub(clk.Real())), 100*time.Millisecond))
		}
		require.True(t, pw.WasOffDuring(requestAt, end), "hiccup=%v: the bare reboot was never carried out with a restart or hiccup every minute; truth %s",
			hiccup, rebootcheck.DescribeTruth(pw))
	}
}
