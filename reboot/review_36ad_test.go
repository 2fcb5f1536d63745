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

// review36adStuckRestarts runs TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver's
// world (a bare hard reboot; from the request on the BMC reads
// Transitioning whatever the power, every call carried out) for dur, and
// restarts the controller (a new Reconciler) `after` after each of
// bareStuck's power-ons (StuckOnDecided), at most maxRestarts times. It
// returns the power, the request's time, the restarts and the host.
func review36adStuckRestarts(t *testing.T, after, dur time.Duration, maxRestarts int) (*fake.Power, time.Time, int, reboot.Host) {
	t.Helper()
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	restarts := 0
	var restartAt time.Time
	for end := at.Add(dur); clk.Real().Before(end); {
		if !restartAt.IsZero() && !clk.Real().Before(restartAt) {
			rec = w.newRec() // a restart (an upgrade, an OOM kill, a node drain)
			restarts++
			restartAt = time.Time{}
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if res.Decision.Power == reboot.ActionPowerOn && !res.Decision.Status.StuckOnDecided.IsZero() && restarts < maxRestarts {
			restartAt = clk.Real().Add(after)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	return pw, at, restarts, h
}

// TestReview36ad_StuckRestartAfterAcceptedOnCyclesAgain: doc.go's
// Guarantees: "No request causes two power cycles, except ... or if the
// controller restarted before it knew that power-on's answer". Here the
// controller knew it (bareStuck's power-on accepted, its answer taken by
// the pass that sent it) and restarts one minute later, inside the
// window (an upgrade). The acceptance lives only in memory (Observed.LastCall,
// decide_bare.go onAccepted), never in the Status, so the restarted
// controller does not give up: after the window it sends the reboot's
// power-off again and a second power cycle follows, though nothing about
// the BMC changed. Persisting the acceptance (as OffOnSane is recorded
// by the pass after the call) would avoid it: the exception is not
// unavoidable, and not the one the doc names.
func TestReview36ad_StuckRestartAfterAcceptedOnCyclesAgain(t *testing.T) {
	pw, at, restarts, h := review36adStuckRestarts(t, time.Minute, 40*time.Minute, 1)
	require.Equal(t, 1, restarts, "the setup: one restart after bareStuck's power-on; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.WasOffDuring(at, at.Add(40*time.Minute)), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.LessOrEqual(t, cycles+oob, 1,
		"one bare reboot, its stuck power-on accepted and known, one restart a minute later: %d power cycles by command (%d out of band) in 40 min (power-offs %d); status %+v; truth %s",
		cycles, oob, review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ad_StuckRestartEachWindowCyclesForEver: the same BMC, the
// controller restarted a minute after each of bareStuck's power-ons (a
// crash loop, or rolling upgrades of a busy cluster: one restart every
// ~7 min, longer than the LostLanding + SoftTimeout + StaleReads doc.go
// A5 names for restarts). TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver's
// bug comes back: one request power-cycles a running host every ~7
// minutes for as long as the sensor stays stuck; StuckGaveUp is never set.
func TestReview36ad_StuckRestartEachWindowCyclesForEver(t *testing.T) {
	pw, at, restarts, h := review36adStuckRestarts(t, time.Minute, 60*time.Minute, 100)
	cycles, oob := rebootcheck.Cycles(pw)
	require.LessOrEqual(t, cycles+oob, 2,
		"one bare reboot, a BMC reading Transitioning whatever the power, %d restarts (one a minute after each stuck power-on): %d power cycles by command (%d out of band) in the hour (power-offs %d), gave up %v; status %+v; truth %s",
		restarts, cycles, oob, review36xCount(pw, fake.OpOff, at), !h.Status.StuckGaveUp.IsZero(), h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ad_StuckLeaseHiccupAfterAcceptedOnCyclesAgain: as
// TestReview36ad_StuckRestartAfterAcceptedOnCyclesAgain without a
// restart: one Hold of the same Reconciler refused a minute after
// bareStuck's power-on (an API server's hiccup during a lease renewal).
func TestReview36ad_StuckLeaseHiccupAfterAcceptedOnCyclesAgain(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	g := &hiccupGuard{}
	w.Guard = g
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	hiccups := 0
	var hiccupAt time.Time
	for end := at.Add(40 * time.Minute); clk.Real().Before(end); {
		if !hiccupAt.IsZero() && !clk.Real().Before(hiccupAt) {
			g.refuse, hiccupAt = 1, time.Time{}
			hiccups++
		}
		res, err := rec.Reconcile(ctx, "h")
		if err != nil {
			clk.Advance(time.Second)
			continue
		}
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if res.Decision.Power == reboot.ActionPowerOn && !res.Decision.Status.StuckOnDecided.IsZero() && hiccups == 0 {
			hiccupAt = clk.Real().Add(time.Minute)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.Equal(t, 1, hiccups, "the setup")
	cycles, oob := rebootcheck.Cycles(pw)
	require.LessOrEqual(t, cycles+oob, 1,
		"one bare reboot, its stuck power-on accepted, one refused Hold a minute later: %d power cycles by command in 40 min; status %+v; truth %s",
		cycles, h.Status, rebootcheck.DescribeTruth(pw))
}

// review36adGaveUp runs TestReview36acFix_GaveUpSurvivesRestartThenSaneReadingResumes's
// world until bareStuck gave up (Status.StuckGaveUp) and returns it.
func review36adGaveUp(t *testing.T) (*review36World, *reboot.Reconciler, *fake.Power, time.Time) {
	t.Helper()
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	review36uLoop(t, rec, clk, at.Add(25*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.StuckGaveUp.IsZero(), "the setup: bareStuck gave up; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "the setup: on after the stuck power-on; truth %s", rebootcheck.DescribeTruth(pw))
	return w, rec, pw, at
}

// TestReview36ad_GaveUpHostPoweredOffOutOfBandOffForEver: doc.go A2:
// "Anyone may power the host on or off out of band at any time". Once
// bareStuck gave up (the BMC reads Transitioning whatever the power), the
// host (Online true, no hold) is powered off out of band (a technician,
// a PDU). With no reboot pending, idle's rule powers such a host on
// (releasedOn: a power-on that sets the power, which powers nothing off;
// TestReview36ad_NoRebootStuckHostPoweredOffOutOfBandPoweredOn, passing).
// With the given-up reboot pending, StuckGaveUp stops every power call,
// power-ons too, though a power-on that sets the power cannot make the
// second power cycle the give-up exists to prevent: the host stays off
// for good (Online true), only ErrStuckTransitioning warned.
func TestReview36ad_GaveUpHostPoweredOffOutOfBandOffForEver(t *testing.T) {
	w, rec, pw, at := review36adGaveUp(t)
	pw.OutOfBandOff()
	oob := w.clk.Real()
	review36uLoop(t, rec, w.clk, oob.Add(60*time.Minute), at)
	h, err := w.store.Get(context.Background(), "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online true, no hold, powered off out of band after StuckGaveUp: still off an hour later (power-ons since %d); status %+v; truth %s",
		review36xCount(pw, fake.OpOn, oob), h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ad_NoRebootStuckHostPoweredOffOutOfBandPoweredOn: the
// control of TestReview36ad_GaveUpHostPoweredOffOutOfBandOffForEver
// without a reboot: the same BMC, the host powered off out of band, is
// powered on by idle's rule (passes; coverage).
func TestReview36ad_NoRebootStuckHostPoweredOffOutOfBandPoweredOn(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm atomic.Bool
	w.Power = alwaysTransitioning{pw, &arm}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	arm.Store(true)
	pw.OutOfBandOff()
	oob := clk.Real()
	review36uLoop(t, rec, clk, oob.Add(60*time.Minute), oob)
	require.True(t, pw.HardwareOn(), "truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview36ad_GaveUpOnlineFalseThenTrueOffForEver: once bareStuck gave
// up, the operator sets Online=false (maintenance) and, after the
// enforcement's power-off, Online=true again. StuckGaveUp survives the
// episode (nothing clears it: bareStuck is skipped while Online is
// false), so the host, now off by the controller's own power-off, gets
// no power-on: off for good with Online true.
func TestReview36ad_GaveUpOnlineFalseThenTrueOffForEver(t *testing.T) {
	w, rec, pw, at := review36adGaveUp(t)
	ctx := context.Background()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	off := w.clk.Real()
	review36uLoop(t, rec, w.clk, off.Add(20*time.Minute), at)
	require.False(t, pw.HardwareOn(), "the setup: Online=false powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	on := w.clk.Real()
	review36uLoop(t, rec, w.clk, on.Add(60*time.Minute), at)
	h, err := w.store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online=false then true after StuckGaveUp: still off an hour after Online=true (power-ons since %d); status %+v; truth %s",
		review36xCount(pw, fake.OpOn, on), h.Status, rebootcheck.DescribeTruth(pw))
}

// review36adDropOn is alwaysTransitioning whose first power-on after arm is
// answered OK but not carried out (a BMC that accepts a job and drops it,
// the power-on kind of doc.go's "a BMC whose power-off job hangs").
type review36adDropOn struct {
	alwaysTransitioning
	dropped *atomic.Bool
}

func (d review36adDropOn) On(ctx context.Context) error {
	if d.arm.Load() && d.dropped.CompareAndSwap(false, true) {
		return nil
	}
	return d.alwaysTransitioning.On(ctx)
}

// TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver: a bare hard reboot
// on a BMC reading Transitioning whatever the power; its ForceOff is
// carried out, bareStuck's power-on is accepted but dropped. bareStuck
// gives up (StuckGaveUp) and makes no further power call, power-ons
// included: the host, off by the controller's own ForceOff, stays off for
// good with Online true. Idle's rule for the same readings (no reboot
// pending) sends a power-on that sets the power again every twice
// SoftTimeout + StaleReads (doc.go: "powered on the same way"); a
// power-on that sets the power powers nothing off, so repeating it
// cannot make the second power cycle the give-up prevents.
func TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm, dropped atomic.Bool
	w.Power = review36adDropOn{alwaysTransitioning{pw, &arm}, &dropped}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	review36uLoop(t, rec, clk, at.Add(90*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, dropped.Load(), "the setup: a power-on was dropped; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(),
		"Online true, no hold, the controller's ForceOff carried out and its power-on dropped: off 90 min after the request (power-ons %d, gave up %v); status %+v; truth %s",
		review36xCount(pw, fake.OpOn, at), h.Status.StuckGaveUp, h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ad_NoRebootDroppedPowerOnRetried: the control of
// TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver without a reboot:
// the host powered off out of band, the BMC reading Transitioning, idle's
// first power-on dropped: idle sends another and the host is on (passes;
// coverage).
func TestReview36ad_NoRebootDroppedPowerOnRetried(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm, dropped atomic.Bool
	w.Power = review36adDropOn{alwaysTransitioning{pw, &arm}, &dropped}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	arm.Store(true)
	pw.OutOfBandOff()
	oob := clk.Real()
	review36uLoop(t, rec, clk, oob.Add(90*time.Minute), oob)
	require.True(t, dropped.Load(), "the setup")
	require.True(t, pw.HardwareOn(), "truth %s", rebootcheck.DescribeTruth(pw))
}

// stepBackDuringOn is nullThenStuckOff whose first power-on after arm
// runs while the wall clock is stepped back by step (an NTP step during a
// BMC call that takes a few seconds).
type stepBackDuringOn struct {
	nullThenStuckOff
	clk     *fake.Clock
	step    time.Duration
	arm     *atomic.Bool
	stepped *atomic.Bool
}

func (s stepBackDuringOn) On(ctx context.Context) error {
	if s.arm.Load() && s.stepped.CompareAndSwap(false, true) {
		s.clk.Jump(-s.step)
	}
	return s.nullThenStuckOff.On(ctx)
}

// TestReview36ad_BareStuckClockStepBackDuringOnOneCycle (passes;
// coverage: the future-timestamp repair clamps StuckOnDecided, so the
// window holds). Round 29
// made "an On reading at any time after the accepted stuck power-on end
// the reboot (wall-clock steps change nothing)" (decide_bare.go
// onAccepted; TestReview36ac_BareStuckClockStepBackSecondCycle steps the
// clock after the pass). onAccepted requires LastCall.At (the wall clock
// read once the call returned, reconciler.go) not before
// Status.StuckOnDecided (the wall clock read before it, truncated): a
// step of the wall clock back by 5 s while the power-on call runs makes
// the accepted power-on not count. The On reading that follows is before
// StuckOnDecided (not in the window) and not onAccepted: pending sends
// the reboot's power-off to the host just powered on, and one bare
// request power-cycles it twice (doc.go: "No request causes two power
// cycles").
func TestReview36ad_BareStuckClockStepBackDuringOnOneCycle(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var offs atomic.Int64
	var arm, stepped atomic.Bool
	w.Power = stepBackDuringOn{nullThenStuckOff{pw, &offs}, clk, 5 * time.Minute, &arm, &stepped}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	review36uLoop(t, rec, clk, at.Add(30*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, stepped.Load(), "the setup: bareStuck's power-on; truth %s", rebootcheck.DescribeTruth(pw))
	require.NotContains(t, h.Annotations, reboot.Annotation, "the reboot never ended; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "off at the end; truth %s", rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.Equal(t, 1, cycles+oob, "a 5 min step back of the wall clock during bareStuck's power-on call: %d power cycles for one bare request; status %+v; truth %s",
		cycles+oob, h.Status, rebootcheck.DescribeTruth(pw))
}

// stepBackDuringOnAT is alwaysTransitioning whose first power-on after
// arm runs while the wall clock is stepped back by step.
type stepBackDuringOnAT struct {
	alwaysTransitioning
	clk     *fake.Clock
	step    time.Duration
	stepped *atomic.Bool
}

func (s stepBackDuringOnAT) On(ctx context.Context) error {
	if s.arm.Load() && s.stepped.CompareAndSwap(false, true) {
		s.clk.Jump(-s.step)
	}
	return s.alwaysTransitioning.On(ctx)
}

// TestReview36ad_AlwaysTransitioningStepBackDuringOnCyclesAgain:
// TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver's BMC (reads
// Transitioning whatever the power, every call carried out), the wall
// clock stepped back by 5 s while bareStuck's power-on call runs (an NTP
// step). The call's answer (LastCall.At, the wall clock once it returned)
// is then dated before Status.StuckOnDecided (decided before it), and
// the next pass's repair of the future StuckOnDecided moves it later
// still: onAccepted (decide_bare.go) never holds, so the window's end
// does not give up (StuckGaveUp) but sends the reboot's power-off again:
// a second power cycle of a running host for one request, which the
// give-up exists to prevent ("wall-clock steps change nothing").
func TestReview36ad_AlwaysTransitioningStepBackDuringOnCyclesAgain(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var arm, stepped atomic.Bool
	w.Power = stepBackDuringOnAT{alwaysTransitioning{pw, &arm}, clk, 5 * time.Second, &stepped}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	arm.Store(true)
	review36uLoop(t, rec, clk, at.Add(60*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, stepped.Load(), "the setup: bareStuck's power-on; truth %s", rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.LessOrEqual(t, cycles+oob, 1,
		"one bare reboot, a BMC reading Transitioning whatever the power, the wall clock stepped back 5 s during the stuck power-on call: %d power cycles in the hour (power-offs %d), gave up %v; status %+v; truth %s",
		cycles+oob, review36xCount(pw, fake.OpOff, at), !h.Status.StuckGaveUp.IsZero(), h.Status, rebootcheck.DescribeTruth(pw))
}
