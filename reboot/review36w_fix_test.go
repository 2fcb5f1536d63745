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

// TestReview36wFix_OfflineOffHostDeadNullBMCOnePowerOffPerRun: the rule
// that answers a long run of unsure readings (unsureLong) must not bring
// back round 22's ForceOff every ReissueAfter. An off host with
// Online=false, its power-off done (OfflineOffSeen), whose BMC then
// answers null for good, gets one hard power-off once the run is
// SoftTimeout + StaleReads long (the host may have been powered on
// meanwhile), then again every 2x(SoftTimeout + StaleReads) while the
// run lasts (an accepted call no longer answers the run for good,
// TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver; nor for as
// long as the run has lasted, up to an hour:
// TestReview36z_HeldHostPoweredOnLateInLongNullRunRunsAnHour), not one
// a minute, and its Status is not rewritten on every pass.
func TestReview36wFix_OfflineOffHostDeadNullBMCOnePowerOffPerRun(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	at := clk.Real()
	// Null at first: the enforcement begins; then Off readings show it done.
	pw.SetReport(fake.Report{Unknown: 1})
	review36uLoop(t, rec, clk, at.Add(10*time.Second), at)
	pw.SetReport(fake.Report{})
	review36uLoop(t, rec, clk, at.Add(5*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.OfflineOffSeen.IsZero(), "the setup: the enforcement's power-off is done; status %+v", h.Status)
	offs0, writes0 := countOffs(pw), store.Updates()
	pw.SetReport(fake.Report{Unknown: 1}) // the BMC answers null for good
	nullFrom := clk.Real()
	end := clk.Real().Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.False(t, pw.HardwareOn(), "truth %s", rebootcheck.DescribeTruth(pw))
	offs, writes := countOffs(pw)-offs0, store.Updates()-writes0
	long, gap := cfg.SoftTimeout+cfg.StaleReads, 2*(cfg.SoftTimeout+cfg.StaleReads)
	require.LessOrEqual(t, offs, 1+int((time.Hour-long)/gap), "an off host held by Online=false, its BMC answering null for an hour: %d power-offs", offs)
	var prev time.Duration
	for _, c := range pw.Calls() {
		if c.Op != fake.OpOff || c.At.Before(nullFrom) {
			continue
		}
		run := c.At.Sub(nullFrom)
		if prev == 0 {
			require.GreaterOrEqual(t, run, long, "the first power-off %v into the null run, before the run was long", run)
		} else {
			require.GreaterOrEqual(t, run-prev, gap,
				"power-off %v into the null run, the one before %v into it: less than 2x(SoftTimeout + StaleReads) apart", run, prev)
		}
		prev = run
	}
	require.LessOrEqual(t, writes, 3+2*offs, "Status writes in that hour: %d (%d power-offs)", writes, offs)
}

// TestReview36wFix_PendingOnStuckTransitioningPoweredOnAgainPoweredOff:
// a pending reboot's power-off was sent and carried out, then someone
// else powered the host on before an Off reading counted, and its BMC
// reads Transitioning while it runs: the power-off counts as under way
// only SoftTimeout + StaleReads, then goes out again (before, "powering
// off: wait" for ever; found by TestRebootStateMachineStuck).
func TestReview36wFix_PendingOnStuckTransitioningPoweredOnAgainPoweredOff(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var stuck bool
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			if stuck {
				return stuckTransitioning{pw}, nil
			}
			return pw, nil
		}}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	_, err := rec.Reconcile(context.Background(), "h") // the ForceOff
	require.NoError(t, err)
	require.False(t, pw.HardwareOn(), "the setup: powered off")
	clk.Advance(time.Second)
	pw.OutOfBandOn()
	stuck = true
	at := clk.Real()
	end := at.Add(15 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.WasOffDuring(at.Add(time.Second), at.Add(cfg.SoftTimeout+cfg.StaleReads+cfg.ReissueAfter+time.Minute)),
		"a fence's host powered on again by someone else before an Off reading counted, its BMC reading Transitioning while it runs: not powered off again; truth %s",
		rebootcheck.DescribeTruth(pw))
}

func countOffs(pw *fake.Power) int {
	n := 0
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff {
			n++
		}
	}
	return n
}

// TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes: the rule for a
// long run of unsure readings on a held host counts the run from its
// persisted start (Status.UnsureSince), not from the controller's start:
// a held host powered on by someone else, its BMC answering null while
// it runs, the controller restarted every 3 minutes, is powered off
// again (before, Observed.UnsureFor restarted with every process and the
// run never became long).
func TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return nullWhileOn{pw}, nil }}
	}
	rec := newRec()
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers() && !pw.HardwareOn(), "the setup: the fence was carried out; status %+v", h.Status)
	pw.OutOfBandOn()
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	for clk.Real().Before(end) {
		rec = newRec()
		review36uLoop(t, rec, clk, clk.Real().Add(3*time.Minute), at)
	}
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at.Add(time.Second), at.Add(10*time.Minute)),
		"a held host powered on by someone else, its BMC answering null while it runs, the controller restarted every 3 minutes: not powered off again within 10 min (in 30 min: %v); status %+v; truth %s",
		pw.WasOffDuring(at.Add(time.Second), end), h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, h.Status.HoldBroken.IsZero(), "HoldBroken reported")
}
