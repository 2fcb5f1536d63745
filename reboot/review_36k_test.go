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

// forgetOnPowerOnWrite is a HostStore whose write before a power-on (the
// first Update that sets Status.LastPoweredOn) is slow: the host is
// forgotten (Reconciler.Forget, from another goroutine in real life) as
// the write begins, and the write returns slow later.
type forgetOnPowerOnWrite struct {
	reboot.HostStore
	clk    *fake.Clock
	slow   time.Duration
	forget func()
	fired  bool
}

func (s *forgetOnPowerOnWrite) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	if !s.fired && !h.Status.LastPoweredOn.IsZero() {
		s.fired = true
		s.forget()
		s.clk.Advance(s.slow)
	}
	return s.HostStore.Update(ctx, h)
}

// Review 36 round 11 (TestReview36k_ForgetBeforePowerOnCountsItFromForget):
// 47db9ae records a power-off still running when its host is forgotten in
// the new memory (reconciler.go: r.current after pc.Off), but a power-on
// notes its lastOn on the pass's memory hm before the call
// (reconciler.go: `hm.lastOn = m` then pc.On), never on the memory that
// Forget put in its place. A host forgotten after the pass took its
// memory and before the power-on (here during the versioned status write
// that precedes every power-on, 20 s on a slow API server) counts, for the
// new memory, as powered on at the Forget, 20 s before the power-on was
// really sent: QuietFor is 20 s too long. The power-on's answer is lost
// (a deadline; the BMC carries it out), so it is retried after RetryDelay
// rather than waited on for ReissueAfter. An Off reading that echoes the
// host before that power-on (reads 29 s old, < StaleReads) is then taken
// as fresh, and the host, Online, is powered on again. On a BMC whose
// power-on is a press of the power button (fake.ButtonAll), that second
// "power-on" presses the button of a running host and shuts it down
// (ground truth: a command turns it off, an Online host with no reboot
// requested). Reconciler.Forget promises the host "counts as possibly
// powered on just now", and QuietFor that an Off reading taken within
// StaleReads of the last power-on never powers the host on.
func TestReview36k_ForgetBeforePowerOnCountsItFromForget(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	timedOut := false
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Button: fake.ButtonAll, SoftDelay: 10 * time.Second,
		Report: fake.Report{Stale: 29 * time.Second, NoTransitioning: true},
		// The first power-on's answer is lost (a deadline): the BMC carries
		// it out all the same.
		Faults: func(c fake.Call) fake.Fault {
			if c.Op == fake.OpOn && !timedOut {
				timedOut = true
				return fake.Fault{Kind: fake.FaultTimeout, Applied: true}
			}
			return fake.Fault{}
		}})
	inner := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	store := &forgetOnPowerOnWrite{HostStore: inner, clk: clk, slow: 20 * time.Second}
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	store.forget = func() { rec.Forget("h") }
	start := clk.Real()
	for clk.Real().Before(start.Add(4 * time.Minute)) {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() {
			t.Logf("%v %v %v %s", clk.Real().Sub(start), res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 100 * time.Millisecond
		}
		clk.Advance(max(next, time.Millisecond))
	}
	require.True(t, store.fired, "the setup: the host was forgotten during the write before its power-on")
	var on bool
	for _, tc := range pw.Truth() {
		if tc.Cause != fake.CauseCommand {
			continue
		}
		if on && !tc.On {
			t.Fatalf("the controller powered an Online host on again on an Off reading that echoed it before its own power-on (sent 20 s after a Forget, counted from the Forget): the press shut the running host down at %v; truth %s",
				tc.At.Sub(start), rebootcheck.DescribeTruth(pw))
		}
		on = on || tc.On
	}
	require.True(t, on, "the setup: the host was powered on; truth %s", rebootcheck.DescribeTruth(pw))
}

// Review 36 round 11 (TestReview36k_SameSecondEnforcementTakesEarlierSoftFailure):
// 27d569e escalates a failed soft power-off only for the work it was
// decided for, named by Work{Reboot, Since}; but Since is the
// enforcement's OfflineSince (or the reboot's PendingRebootSince),
// truncated to Config.Precision (decide.go idle: `st.OfflineSince = p`,
// p = now.Truncate(Precision); Work.Is compares Since only). An
// Online=false enforcement that ended (Online set true, OfflineSince
// cleared) and a new one begun within the same second carry the same tag:
// the first one's soft failure turns the new one's first power-off hard,
// before its soft power-off was ever tried, which reboot/doc.go and
// Call.For say it must not ("one decided for an earlier ... Online=false
// enforcement does not count").
func TestReview36k_SameSecondEnforcementTakesEarlierSoftFailure(t *testing.T) {
	cfg := reboot.DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 10, 100e6, time.UTC)
	o := reboot.Observed{Online: false, Power: power.StateOn, QuietFor: time.Hour}
	d1 := cfg.Decide(o, t0)
	require.Equal(t, reboot.ActionPowerOff, d1.Power, "the setup: enforcement 1 powers off")
	require.Equal(t, power.ModeSoft, d1.Mode)
	failed := reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassFailed, At: t0.Add(200 * time.Millisecond), For: d1.For}
	// Online is set true: the enforcement ends.
	o2 := reboot.Observed{Online: true, Power: power.StateOn, Status: d1.Status, LastCall: failed, QuietFor: time.Hour}
	d2 := cfg.Decide(o2, t0.Add(300*time.Millisecond))
	require.True(t, d2.Status.OfflineSince.IsZero(), "the setup: enforcement 1 ended")
	// Online is set false again: a new enforcement, in the same second.
	o3 := reboot.Observed{Online: false, Power: power.StateOn, Status: d2.Status, LastCall: failed, QuietFor: time.Hour}
	d3 := cfg.Decide(o3, t0.Add(600*time.Millisecond))
	require.Equal(t, reboot.ActionPowerOff, d3.Power)
	if d3.Mode != power.ModeSoft {
		t.Fatalf("a new Online=false enforcement (begun after the previous one ended) was escalated to hard at once by the previous enforcement's soft failure (its Work tag, truncated to the second, is the same: %+v vs %+v): %s",
			d3.For, failed.For, d3.Reason)
	}
}
