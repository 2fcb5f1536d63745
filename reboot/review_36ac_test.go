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

// crashOnFirstOn is nullThenStuckOff (null readings until the first
// power-off, then Transitioning while the host is off) whose first
// power-on after arm never reaches the BMC: the controller dies between
// its versioned write (Status.StuckOnDecided) and the call.
type crashOnFirstOn struct {
	nullThenStuckOff
	arm, crashed *atomic.Bool
}

func (c crashOnFirstOn) On(ctx context.Context) error {
	if c.arm.Load() && c.crashed.CompareAndSwap(false, true) {
		return context.Canceled
	}
	return c.nullThenStuckOff.On(ctx)
}

// TestReview36ac_BareStuckRestartBetweenWriteAndOn: as
// TestReview36abFix_BareStuckOffOneCycle, but the controller restarts
// between bareStuck's write of Status.StuckOnDecided and its power-on.
// The host (off, the BMC reading Transitioning) must still be powered on
// and the reboot end, with one power cycle, within a bounded time.
func TestReview36ac_BareStuckRestartBetweenWriteAndOn(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var offs atomic.Int64
	var arm, crashed atomic.Bool
	w.Power = crashOnFirstOn{nullThenStuckOff{pw, &offs}, &arm, &crashed}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	arm.Store(true)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	end := at.Add(30 * time.Minute)
	done, restarted := time.Time{}, time.Time{}
	for clk.Real().Before(end) {
		res, err := rec.Reconcile(ctx, "h")
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if crashed.Load() && restarted.IsZero() {
			restarted = clk.Real()
			h, _ := store.Get(ctx, "h")
			require.False(t, h.Status.StuckOnDecided.IsZero(), "the setup: StuckOnDecided written before the call; status %+v", h.Status)
			rec = w.newRec() // the controller died after its write, before its power-on
			clk.Advance(time.Second)
			continue
		}
		require.NoError(t, err)
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if _, ok := h.Annotations[reboot.Annotation]; !ok && done.IsZero() {
			done = clk.Real()
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.False(t, restarted.IsZero(), "the setup: bareStuck's power-on never came; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, done.IsZero(), "the reboot never ended (restart %v after the request); status %+v; truth %s", restarted.Sub(at), h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "off at the end (restart %v after the request); status %+v; truth %s", restarted.Sub(at), h.Status, rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.Equal(t, 1, cycles+oob, "%d power cycles by command (%d out of band) for one request, restart between StuckOnDecided's write and the power-on; status %+v; truth %s",
		cycles, oob, h.Status, rebootcheck.DescribeTruth(pw))
	t.Logf("done %v after the request, restart at %v", done.Sub(at), restarted.Sub(at))
}

// alwaysTransitioning reads Transitioning whatever the hardware's power,
// once armed (a BMC whose power sensor froze on "PoweringOff"/"PoweringOn"
// at the request; every call still carried out).
type alwaysTransitioning struct {
	*fake.Power
	arm *atomic.Bool
}

func (a alwaysTransitioning) State(ctx context.Context) (power.State, error) {
	st, err := a.Power.State(ctx)
	if err == nil && a.arm.Load() {
		return power.StateTransitioning, nil
	}
	return st, err
}

// TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver: doc.go's
// Guarantees: "No request causes two power cycles" (but for a lost
// answer's late landing). A bare hard reboot asked of a host whose BMC
// reads Transitioning from then on whatever the power (every call
// carried out): bareStuck powers it on after SoftTimeout+StaleReads,
// finds it still Transitioning after the window (it never reads On),
// and "the power-off goes out again"; then again bareStuck's power-on,
// and so on: one request power-cycles a running host every few minutes
// for as long as the sensor stays stuck, and the reboot never ends.
func TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver(t *testing.T) {
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
	review36uLoop(t, rec, clk, at.Add(60*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, clk.Real()), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
	cycles, oob := rebootcheck.Cycles(pw)
	require.LessOrEqual(t, cycles+oob, 1,
		"one bare reboot, a BMC reading Transitioning whatever the power: %d power cycles by command (%d out of band) in the hour after the request (power-offs %d), annotation still present %v; status %+v; truth %s",
		cycles, oob, review36xCount(pw, fake.OpOff, at), h.Annotations[reboot.Annotation] != "", h.Status, rebootcheck.DescribeTruth(pw))
}

// review36acStuckOnJump runs TestReview36abFix_BareStuckOffOneCycle's
// world (a bare hard reboot, the BMC reading Transitioning while the host
// is off) and moves the wall clock by jump right after bareStuck's
// power-on. It returns the power, the cycles by command and whether the
// reboot ended.
func review36acStuckOnJump(t *testing.T, jump time.Duration) (*fake.Power, int, bool, reboot.Host) {
	t.Helper()
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var offs atomic.Int64
	w.Power = nullThenStuckOff{pw, &offs}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	jumped := false
	for end := at.Add(30 * time.Minute); clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		if !jumped && res.Decision.Power == reboot.ActionPowerOn && !res.Decision.Status.StuckOnDecided.IsZero() {
			jumped = true
			clk.Jump(jump)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.True(t, jumped, "the setup: bareStuck's power-on; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	_, pending := h.Annotations[reboot.Annotation]
	cycles, oob := rebootcheck.Cycles(pw)
	return pw, cycles + oob, !pending, h
}

// TestReview36ac_BareStuckClockStepBackSecondCycle: bareStuck ends the
// reboot on an On reading only while the wall clock is not before
// Status.StuckOnDecided (decide_bare.go: window's !now.Before(at)). An NTP
// step of the wall clock back by 5 s right after its power-on (A3: clocks
// agree, a step is corrected) makes the On reading that follows fall
// outside the window: bareStuck returns false, pending sends the reboot's
// power-off to the host just powered on, and one request power-cycles it
// twice ("No request causes two power cycles"; the OffOnSane rule was
// made to compare no clock for this reason).
func TestReview36ac_BareStuckClockStepBackSecondCycle(t *testing.T) {
	pw, cycles, done, h := review36acStuckOnJump(t, -5*time.Second)
	require.True(t, done, "the reboot never ended; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "off at the end; truth %s", rebootcheck.DescribeTruth(pw))
	require.Equal(t, 1, cycles, "a 5 s step back of the wall clock after bareStuck's power-on: %d power cycles for one bare request; status %+v; truth %s",
		cycles, h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview36ac_BareStuckClockStepForwardSecondCycle: as
// TestReview36ac_BareStuckClockStepBackSecondCycle, the wall clock
// stepped forward by 5 minutes right after bareStuck's power-on (a
// controller clock that was behind, corrected by NTP): the On reading
// that follows falls outside the window timed on the wall clock.
func TestReview36ac_BareStuckClockStepForwardSecondCycle(t *testing.T) {
	pw, cycles, done, h := review36acStuckOnJump(t, 5*time.Minute)
	require.True(t, done, "the reboot never ended; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(), "off at the end; truth %s", rebootcheck.DescribeTruth(pw))
	require.Equal(t, 1, cycles, "a 5 min step forward of the wall clock after bareStuck's power-on: %d power cycles for one bare request; status %+v; truth %s",
		cycles, h.Status, rebootcheck.DescribeTruth(pw))
}
