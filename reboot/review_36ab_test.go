package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// busyThenStuckOn is round 21's BMC (stuckTransitioning: it reads
// Transitioning while the host runs, and drops the ForceOff it accepts)
// whose stuck spell begins at the reboot's first power-off: that one is
// answered 409 busy (not carried out, e.g. a job already queued), the
// readings say Transitioning from then on while the host runs, and the
// next power-off is accepted and dropped. Later ones are carried out.
type busyThenStuckOn struct {
	*fake.Power
	calls *atomic.Int64
}

func (s busyThenStuckOn) Off(ctx context.Context, m power.Mode) error {
	switch s.calls.Add(1) {
	case 1:
		return s.Power.Off(ctx, m) // FailNext: busy, not carried out
	case 2:
		return nil // accepted and dropped
	}
	return s.Power.Off(ctx, m)
}

func (s busyThenStuckOn) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil && st == power.StateOn && s.calls.Load() > 0 {
		return power.StateTransitioning, nil
	}
	return st, err
}

// Review 36 round 28 (TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff):
// round 27 replaced runAfter (the run of Transitioning readings began
// after the accepted power-off) with Status.OffOnSane, set in the write
// before a power-off decided on an On or Off reading, whether or not
// that power-off is then carried out. A bare hard reboot of a running
// host: its first ForceOff, decided on an On reading (OffOnSane set), is
// answered 409 busy; the BMC reads Transitioning from then on while the
// host runs (TestReview36z_BareRebootDoneWithoutPowerOff's BMC, its stuck
// spell beginning a second later); the retry, after RetryDelay, is
// accepted and dropped. The run began before the only accepted
// power-off ("a run under way before shows nothing of the power-off,
// which is sent again"), yet releasedPending takes OffOnSane for "the
// run began after our power-off": 210 s later the reboot is reported done
// (annotation removed, LastPoweredOn written) though the host never went
// off (ground truth). Round 26's runAfter sent the ForceOff again.
//
// Round 29 (TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver):
// from the controller's evidence this BMC and one that reads
// Transitioning whatever the power are the same sequence (an accepted
// power-off, Transitioning, bareStuck's accepted power-on, still
// Transitioning at its window's end), and sending the power-off again
// after that window power-cycled the latter every few minutes for ever.
// The lead's decision: bareStuck then makes no further power call for
// the request (Status.StuckGaveUp) and the reboot stays pending, so
// this test's old setup line "the reboot ended" can no longer hold. What
// must still hold: within its 20 minutes either the reboot ended with
// the host off during it (ground truth), or it is still pending with
// StuckGaveUp set, LastPoweredOn not past the request, the annotation
// present and no power-off after StuckGaveUp (round 30: power-ons that
// set the power may follow); never reported done with the host not off.
func TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var calls atomic.Int64
	w.Power = busyThenStuckOn{pw, &calls}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	done, gaveUp := time.Time{}, time.Time{}
	var offsAtGaveUp int64
	for end := at.Add(20 * time.Minute); clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if _, ok := h.Annotations[reboot.Annotation]; !ok {
			done = clk.Real()
			break
		}
		if gaveUp.IsZero() && !h.Status.StuckGaveUp.IsZero() {
			gaveUp, offsAtGaveUp = clk.Real(), calls.Load()
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.GreaterOrEqual(t, calls.Load(), int64(2), "the setup: the first ForceOff was busy, the second dropped")
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	if !done.IsZero() {
		require.True(t, pw.WasOffDuring(at, done),
			"a bare hard reboot, its first ForceOff answered busy, the BMC then stuck reading Transitioning while the host runs and its next ForceOff accepted and dropped: reported done (annotation removed) %v after the request though the host never went off (power-offs %d); status %+v; truth %s",
			done.Sub(at), review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
		return
	}
	require.False(t, gaveUp.IsZero(), "neither done nor given up 20 min after the request; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, h.Status.StuckGaveUp.IsZero(), "given up at %v, then cleared; status %+v", gaveUp.Sub(at), h.Status)
	require.Contains(t, h.Annotations, reboot.Annotation)
	require.False(t, h.Status.LastPoweredOn.After(at), "pending, yet LastPoweredOn moved past the request; status %+v", h.Status)
	require.Equal(t, offsAtGaveUp, calls.Load(), "a power-off after StuckGaveUp; truth %s", rebootcheck.DescribeTruth(pw))
	// Round 30 (TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver): the
	// give-up blocks the reboot's power-off only; a power-on that sets
	// the power may follow it (it cannot make a cycle). The host ran
	// throughout: never off after the give-up.
	require.False(t, pw.WasOffDuring(gaveUp, clk.Real()), "off after StuckGaveUp; truth %s", rebootcheck.DescribeTruth(pw))
}

// Review 36 round 28 (TestReview36ab_BareRebootAskedDuringStuckOffRunOffForEver):
// a running host (Online) whose BMC (no button: its power-on sets the
// power) reads Transitioning while the host is off (round 23's
// stuckPoweringOff) loses its power out of band (a PSU glitch, a
// pressed button). With no request, idle's releasedOn powers it on once
// the run has lasted SoftTimeout + StaleReads (doc.go: "a host with
// Online true and no hold whose readings say Transitioning for that long
// is powered on"). A bare reboot asked 60 s into that run (the node went
// NotReady: someone asks for a reboot) is never answered and the host,
// off since, stays off for good: every power-off of the reboot is
// decided on a Transitioning reading, so Status.OffOnSane is never set
// and releasedPending never ends it; pending repeats the ForceOff
// for ever. The annotation that asked for a power cycle keeps the host
// off (ground truth) where no annotation would have had it on in 4 min.
func TestReview36ab_BareRebootAskedDuringStuckOffRunOffForEver(t *testing.T) {
	ctx := context.Background()
	for _, ask := range []bool{false, true} {
		w := newReview36World()
		clk, store := w.clk, w.store
		pw := fake.NewPower(clk.Real, fake.PowerConfig{})
		w.Power = stuckPoweringOff{pw}
		rec := w.newRec()
		start := clk.Real()
		review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
		require.True(t, pw.HardwareOn(), "the setup: the host runs")
		pw.OutOfBandOff() // the host loses its power; its BMC reads Transitioning from now on
		cut := clk.Real()
		review36uLoop(t, rec, clk, cut.Add(time.Minute), cut)
		if ask {
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.Annotation: ""}
			}))
		}
		end := cut.Add(60 * time.Minute)
		review36uLoop(t, rec, clk, end, cut)
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if !ask {
			require.True(t, pw.HardwareOn(), "the setup: with no request the host is powered on; truth %s", rebootcheck.DescribeTruth(pw))
			continue
		}
		require.True(t, pw.HardwareOn(),
			"a running host (Online) whose BMC (no button) reads Transitioning while it is off, powered off out of band, a bare reboot asked 60 s later: still off 60 min after the cut (power-offs %d, power-ons %d), though with no request it is powered on 210 s into the run; annotations %v; status %+v; truth %s",
			review36xCount(pw, fake.OpOff, cut), review36xCount(pw, fake.OpOn, cut), h.Annotations, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// Review 36 round 28 (TestReview36ab_UpgradeEarlyInLongerFlappingNullFalseHoldBroken):
// TestReview36aa_RestartEarlyInLongerFlappingNullFalseHoldBroken where
// the restart is the upgrade to round 27. The previous version kept
// Status.UnsureSince through short Off spells exactly as this one does
// but never wrote Status.UnsureInterrupted (it has no such field: its
// status reads false), and StatusFormat did not change (1), so the new
// controller cannot tell its status from one that says "no On or Off
// reading since UnsureSince": restarted early in a null run of the
// flapping BMC it counts the run from the first run's UnsureSince and
// records a false HoldBroken on a fenced host off all along (ground
// truth), as round 27 fixed for restarts of the same version.
//
// The store write that models the upgrade (it leaves the requests as
// they were) is itself harmless: with the mark kept the same run ends
// with no HoldBroken (the first, control, round).
func TestReview36ab_UpgradeEarlyInLongerFlappingNullFalseHoldBroken(t *testing.T) {
	for _, keepMark := range []bool{true, false} {
		review36abUpgradeFlapping(t, keepMark)
	}
}

func review36abUpgradeFlapping(t *testing.T, keepMark bool) {
	t.Helper()
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var flap atomic.Bool
	const period, sane = 170 * time.Second, 20 * time.Second
	w.Power = flapSwitch{pw, nullMostOfPeriod{pw, clk, period, sane}, &flap}
	rec := w.newRec()
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	fenced, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: the fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	flap.Store(true)
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	restarted := false
	var restartAt time.Time
	for clk.Real().Before(end) {
		phase := time.Duration(clk.Real().UnixNano()) % period
		if !restarted && clk.Real().After(at.Add(5*time.Minute)) && phase >= 5*time.Second && phase < 30*time.Second {
			restarted = true
			restartAt = clk.Real()
			// The previous version wrote this status: no UnsureInterrupted.
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Status.UnsureInterrupted = h.Status.UnsureInterrupted && keepMark }))
			h, err := store.Get(ctx, "h")
			require.NoError(t, err)
			require.True(t, h.Status.HoldBroken.IsZero(), "the setup: no HoldBroken before the upgrade; status %+v", h.Status)
			require.False(t, h.Status.UnsureSince.IsZero(), "the setup: a persisted run before the upgrade; status %+v", h.Status)
			rec = w.newRec() // the upgrade, 5-30 s into a 150 s null run
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.True(t, restarted, "the setup: the controller was upgraded")
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	broken, err := client.HoldBroken(ctx, tk)
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	if keepMark {
		require.True(t, broken.IsZero(), "the setup (control, UnsureInterrupted kept): no HoldBroken; status %+v", h.Status)
		return
	}
	require.True(t, broken.IsZero(),
		"a fenced host, off all along (ground truth), its BMC null 150 s and Off 20 s of every 170 s, the controller upgraded from round 26 %v after the flapping began, early in a null run: the fencing client is told its hold broke at %v (%v after the upgrade; power-offs since %d); status %+v",
		restartAt.Sub(at), broken, broken.Sub(restartAt), review36xCount(pw, fake.OpOff, at), h.Status)
}

// Review 36 round 28 (TestReview36ab_UpgradeDuringStuckPoweringOffRunOffForEver):
// TestReview36aa_BareRebootStuckPoweringOffRestartOffForEver where the
// restart is the upgrade from round 26. The previous version decided the
// reboot's ForceOff on an On reading but had no Status.OffOnSane to write
// (its rule, runAfter, lived in memory), and StatusFormat did not change:
// the upgraded controller reads a pending bare reboot with no OffOnSane,
// sends the ForceOff again on the Transitioning reading (which stamps
// nothing) and so never ends the reboot: the host, whose reboot was
// asked, stays off for good (ground truth). With the same status as
// round 27 writes it (OffOnSane kept: the control round) it is powered on.
func TestReview36ab_UpgradeDuringStuckPoweringOffRunOffForEver(t *testing.T) {
	for _, keep := range []bool{true, false} {
		ctx := context.Background()
		w := newReview36World()
		clk, store := w.clk, w.store
		pw := fake.NewPower(clk.Real, fake.PowerConfig{})
		w.Power = stuckPoweringOff{pw}
		rec := w.newRec()
		review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
		at := clk.Real()
		require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
			h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
		}))
		review36uLoop(t, rec, clk, at.Add(2*time.Minute), at)
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		require.False(t, pw.HardwareOn(), "the setup: the ForceOff powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
		require.False(t, h.Status.OffOnSane.IsZero(), "the setup: the ForceOff was decided on an On reading; status %+v", h.Status)
		// The previous version wrote this status: no OffOnSane.
		require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
			if !keep {
				h.Status.OffOnSane = time.Time{}
			}
		}))
		rec = w.newRec() // the upgrade, inside the Transitioning run
		end := at.Add(60 * time.Minute)
		review36uLoop(t, rec, clk, end, at)
		h, err = store.Get(ctx, "h")
		require.NoError(t, err)
		if keep {
			require.True(t, pw.HardwareOn(), "the setup (control, OffOnSane kept): powered on; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
			continue
		}
		require.True(t, pw.HardwareOn(),
			"a bare hard reboot of a running host whose BMC (no button) reads Transitioning while it is off, the controller upgraded from round 26 2 min after the request: still off 60 min later (%d power-offs since); annotations %v; status %+v; truth %s",
			review36xCount(pw, fake.OpOff, at), h.Annotations, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// Review 36 round 28 (TestReview36ab_HeldHostOnStuckTwoBusyRunsTwelveMinutes):
// found by TestRebootStateMachineHostile (-rapid.checks=6000; the saved
// case: a held host powered on out of band at the start of the liveness
// phase, its BMC stuck reading Transitioning while on, two 409 answers
// queued for its power-offs), made deterministic here. A fenced host
// (keyed hard fence carried out: off, evidence) whose BMC then reads
// Transitioning while the host runs is powered on by someone else. The
// stuck rule sends a ForceOff 210 s into the run; the BMC answers it 409
// busy (not carried out), and the next one too. runBackoff grows the
// wait after each busy answer with the run's length (until the run has
// doubled), so the third ForceOff goes out 14 minutes into the run: the
// fenced host runs for 14 minutes after two transient busy answers, past
// the bound the conformance kit's hostile state machine holds a held
// host to once its BMC takes calls (LostLanding + 2x(SoftTimeout +
// StaleReads) + ReissueAfter + 1 min, 12 min here).
func TestReview36ab_HeldHostOnStuckTwoBusyRunsTwelveMinutes(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var stuck atomic.Bool
	w.Power = flapSwitch{pw, stuckTransitioning{pw}, &stuck}
	rec := w.newRec()
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	fenced, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: the fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	stuck.Store(true) // the BMC reads Transitioning while the host runs
	pw.OutOfBandOn()  // someone powers the fenced host on
	on := clk.Real()
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	end := on.Add(30 * time.Minute)
	offAt := time.Time{}
	for clk.Real().Before(end) && offAt.IsZero() {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(on), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if !pw.HardwareOn() {
			offAt = clk.Real()
			break
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 5*time.Second))
	}
	cfg := w.cfg
	bound := reboot.LostLandingOf(cfg) + 2*(cfg.SoftTimeout+cfg.StaleReads) + cfg.ReissueAfter + time.Minute
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.HoldBroken.IsZero(), "the setup: the break is reported; status %+v", h.Status)
	require.False(t, offAt.IsZero(), "the fenced host was never powered off again; truth %s", rebootcheck.DescribeTruth(pw))
	require.LessOrEqual(t, offAt.Sub(on), bound,
		"a fenced host powered on by someone else, its BMC stuck reading Transitioning while on, its first two ForceOffs answered 409 busy: running %v before it is powered off again (bound %v; power-offs %d); status %+v; truth %s",
		offAt.Sub(on), bound, review36xCount(pw, fake.OpOff, on), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 28 (TestReview36ab_HeldHostPoweredOnWhileSecondFenceJoinsNoHoldBroken):
// Status.HoldBroken is recorded only by heldOff, that is while the
// evidence covers every request (Status.Covers). Client A holds a fenced
// host (keyed hard fence carried out, evidence). Client B asks for its
// own fence: the reboot is pending again until an Off reading StaleReads
// after B's request covers it. Someone powers the host on right after B's
// request (within that window): pending reads it On and powers it off
// again ("power-off accepted but the host reads on"), but records no
// HoldBroken, and B's evidence then moves LastPoweredOff past the
// sighting. Client A, whose hold was broken (the host ran, ground truth,
// after A was told fenced and while A's annotation was present), gets
// Fenced true and HoldBroken zero: the alarm Client.HoldBroken promises
// ("when the host was last seen powered on by someone else while the
// controller held it off for this ticket") never fires.
func TestReview36ab_HeldHostPoweredOnWhileSecondFenceJoinsNoHoldBroken(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	w.Power = pw
	rec := w.newRec()
	a := &reboot.Client{Hosts: store, Key: "a", Now: clk.Now}
	b := &reboot.Client{Hosts: store, Key: "b", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tkA, err := a.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(2*time.Minute), clk.Real())
	fenced, err := a.Fenced(ctx, tkA)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: A's fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	tkB, err := b.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	_, err = rec.Reconcile(ctx, "h") // the controller sees B's request
	require.NoError(t, err)
	clk.Advance(2 * time.Second)
	pw.OutOfBandOn() // someone powers the held host on
	brokeAt := clk.Real()
	clk.Advance(time.Second) // the controller's next pass is a second later
	review36uLoop(t, rec, clk, brokeAt.Add(5*time.Minute), brokeAt)
	require.False(t, pw.HardwareOn(), "the setup: the host was powered off again; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.WasOnAt(brokeAt), "the setup: the host ran after A was fenced; truth %s", rebootcheck.DescribeTruth(pw))
	fenced, err = a.Fenced(ctx, tkA)
	require.NoError(t, err)
	broken, err := a.HoldBroken(ctx, tkA)
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, broken.IsZero(),
		"client A held a fenced host (told fenced: %v); someone powered it on %v after client B asked for its own fence, and the controller powered it off again: A's HoldBroken is zero though the host ran while A's hold was in place; status %+v; truth %s",
		fenced, brokeAt.Sub(tkB.At), h.Status, rebootcheck.DescribeTruth(pw))
}
