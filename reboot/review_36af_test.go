package reboot_test

import (
	"context"
	"testing"
	"time"

	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36af_ReleasedOnHostPressedOff: a BMC whose power-on is a
// press of the power button (fake.ButtonAll: OnToggler). A keyed hard
// fence is carried out (the host off, held). While it is held, someone
// powers the host on out of band (A2: anyone may, at any time); the
// controller powers it off again, and the host is powered on again out
// of band late, just before the client releases its hold. The first
// pass after the release reads On and decides heldOff's "released, and
// powered on by someone else meanwhile: power on": on this BMC that
// power-on is a press, sent to a host that runs, which shuts it down.
// Doc.go: "A pass that reads it never powers the host on (some BMCs can
// only toggle, and a toggle sent to a host that is off powers it on)",
// and issue 36 item 1: no toggle unless a reading that cannot be an
// echo shows the opposite state. The released host is Online, reads On
// and runs: it must not be powered off after the release (ground truth).
func TestReview36af_ReleasedOnHostPressedOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), start)
	require.False(t, pw.HardwareOn(), "the setup: the fence powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPoweredOff.IsZero(), "the setup: evidence %+v", h.Status)
	// Someone powers the held host on just before the client releases
	// it (the controller would power it off again, but the release
	// comes first).
	pw.OutOfBandOn()
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Annotations = nil }))
	clk.Advance(20 * time.Second) // the read shows the host on by now
	rel := clk.Real()
	require.True(t, pw.HardwareOn())
	review36uLoop(t, rec, clk, rel.Add(20*time.Minute), start)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, pw.WasOffDuring(rel, clk.Real()),
		"a released, Online host that runs and reads On was powered off by the controller's own power-on press (ButtonAll); on calls after release %d; status %+v; truth %s",
		review36xCount(pw, fake.OpOn, rel), h.Status, rebootcheck.DescribeTruth(pw))
}

// review36afWriting runs rec on "h" until stop (checked after each pass)
// or until limit, a second writer writing an annotation of its own every
// `every` (the inventory sync), and reports whether stop held.
func review36afWriting(t *testing.T, w *review36World, rec *reboot.Reconciler, limit, every time.Duration, n *int, stop func() bool) bool {
	t.Helper()
	ctx := context.Background()
	end := w.clk.Real().Add(limit)
	nextWrite := w.clk.Real().Add(every)
	for w.clk.Real().Before(end) {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if stop != nil && stop() {
			return true
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Millisecond
		}
		if until := nextWrite.Sub(w.clk.Real()); until <= next {
			w.clk.Advance(until)
			*n++
			v := *n
			require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
				if h.Annotations == nil {
					h.Annotations = map[string]string{}
				}
				h.Annotations["inventory.example.com/synced"] = time.Duration(v).String()
			}))
			nextWrite = nextWrite.Add(every)
			continue
		}
		w.clk.Advance(next)
	}
	return stop != nil && stop()
}

// TestReview36af_FenceAfterStuckRunWithWriterLate: issue 36 item 2: "a
// request is answered within Lag + StaleReads + 1 s of its arrival
// whatever else writes the record, with a second writer that never
// stops". Client A holds a host off (hard fence carried out). Its BMC
// then reads Transitioning for 20 minutes whatever the power (the held
// host's stuck rule powers it off hard every few minutes, HoldBroken),
// then reads right again (Off). Client B asks a hard fence right after
// the readings come back, an inventory sync writing the record every
// 10 s throughout. B must be answered within Lag + StaleReads + 1 s.
func TestReview36af_FenceAfterStuckRunWithWriterLate(t *testing.T) {
	const lag = time.Second
	for _, after := range []time.Duration{0, 5 * time.Second, 40 * time.Second} {
		t.Run(after.String(), func(t *testing.T) {
			ctx := context.Background()
			w := newReview36World()
			clk, store := w.clk, w.store
			pw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: lag})
			var arm atomic.Bool
			w.Power = alwaysTransitioning{pw, &arm}
			rec := w.newRec()
			start := clk.Real()
			n := 0
			review36afWriting(t, w, rec, 10*time.Minute, 10*time.Second, &n, nil)
			a := &reboot.Client{Hosts: store, Key: "a", Now: clk.Now}
			b := &reboot.Client{Hosts: store, Key: "b", Now: clk.Now}
			fenced := func(c *reboot.Client, tk reboot.Ticket) func() bool {
				return func() bool { f, err := c.Fenced(ctx, tk); require.NoError(t, err); return f }
			}
			tkA, err := a.Request(ctx, "h", power.ModeHard)
			require.NoError(t, err)
			require.True(t, review36afWriting(t, w, rec, 2*time.Minute, 10*time.Second, &n, fenced(a, tkA)), "the setup: A fenced")
			arm.Store(true)
			review36afWriting(t, w, rec, 20*time.Minute, 10*time.Second, &n, nil)
			arm.Store(false)
			review36afWriting(t, w, rec, after, 10*time.Second, &n, nil)
			require.False(t, pw.HardwareOn(), "the setup: held host off")
			tkB, err := b.Request(ctx, "h", power.ModeHard)
			require.NoError(t, err)
			at := clk.Real()
			ok := review36afWriting(t, w, rec, 10*time.Minute, 10*time.Second, &n, fenced(b, tkB))
			h, err := store.Get(ctx, "h")
			require.NoError(t, err)
			require.True(t, ok, "B never answered in 10 min; status %+v", h.Status)
			require.LessOrEqual(t, clk.Real().Sub(at), lag+w.cfg.StaleReads+time.Second,
				"B's fence, asked %v after a 20 min Transitioning run ended, with a second writer every 10 s: answered after %v; status %+v; truth %s (since start %v)",
				after, clk.Real().Sub(at), h.Status, rebootcheck.DescribeTruth(pw), at.Sub(start))
		})
	}
}

// TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand: a BMC whose
// power-on is a press (fake.ButtonAll: OnToggler). An idle Online host is
// powered off out of band; the controller presses On, and the answer is
// lost (a timeout) though the BMC carries the press out 90 s later
// (A5: within Config.LostLanding, SoftTimeout by default). Doc.go A2/A5:
// "a power-on whose answer was lost on a controller whose power-on may
// press the power button (OnToggler): it may land on a host that runs by
// then and shut it down", and the controller counts such a press "as
// sent LostLanding after its return" (Observed.SincePress, landWait).
// idle's power-on on an Off reading checks no landWait: it presses again
// while the lost press may still land; the host comes on, and the lost
// press then lands on the running host and shuts it down. Ground truth:
// once the host is on after the out-of-band power-off, no command may
// power it off (Online true, no request).
func TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	pw.OutOfBandOff()
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 90 * time.Second})
	oob := clk.Real()
	review36uLoop(t, rec, clk, oob.Add(30*time.Minute), start)
	var firstOn time.Time
	for _, tc := range pw.Truth() {
		if tc.On && tc.At.After(oob) {
			firstOn = tc.At
			break
		}
	}
	require.False(t, firstOn.IsZero(), "never powered on; truth %s", rebootcheck.DescribeTruth(pw))
	require.False(t, pw.WasOffDuring(firstOn.Add(time.Millisecond), clk.Real()),
		"an idle Online host powered on again after an out-of-band power-off was then shut down by the controller's own presses (on calls %d): a second power-on press sent while the lost one could still land; truth %s",
		review36xCount(pw, fake.OpOn, oob), rebootcheck.DescribeTruth(pw))
}

// review36afOnTransitioning reads Transitioning whenever the fake reads
// On, once armed: a BMC stuck on Transitioning while the host runs (the
// rapid world's stuckTransitioningOn).
type review36afOnTransitioning struct {
	*fake.Power
	arm *atomic.Bool
}

func (a review36afOnTransitioning) State(ctx context.Context) (power.State, error) {
	st, err := a.Power.State(ctx)
	if err == nil && st == power.StateOn && a.arm.Load() {
		return power.StateTransitioning, nil
	}
	return st, err
}

// TestReview36af_SoftIgnoredBareRebootDoneWithoutPowerOff: the rapid
// state machine (TestRebootStateMachineHostile -rapid.seed=1175287, kit
// check "bare annotation removed, but the hardware has not been off
// since") made deterministic. A bare soft reboot of a running host whose
// OS ignores ACPI (fake IgnoreSoft); its soft power-off is decided on an
// On reading and accepted (Status.OffOnSane), then the BMC reads
// Transitioning whenever the host is on. Doc.go: soft "falls back to hard
// Config.SoftTimeout (180 s) after its first soft power-off". The
// fallback is due at SoftTimeout; releasedPending (offOver, a long run)
// is due at SoftTimeout + StaleReads. A pass that comes after both (a
// host with a small StaleReads: any pass more than StaleReads after
// SoftTimeout; with the default 30 s, a pass gap of 30 s around then)
// takes releasedPending first: "off and released: power on", annotation
// removed, LastPoweredOn written, and the host never went off. Ground
// truth: a bare reboot whose annotation is removed was off since it was
// asked (the kit's own check).
func TestReview36af_SoftIgnoredBareRebootDoneWithoutPowerOff(t *testing.T) {
	for _, c := range []struct {
		name  string
		stale time.Duration // the host's StaleReads (0: Config's, 30 s)
		from  time.Duration // no pass from then (after the request)
		gap   time.Duration // for this long
	}{
		{"fast-BMC-StaleReads-2s-pass-gap-5s", 2 * time.Second, 178 * time.Second, 5 * time.Second},
		{"default-StaleReads-pass-gap-45s", 0, 170 * time.Second, 45 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			w := newReview36World()
			clk, store := w.clk, w.store
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.StaleReads = c.stale }))
			pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
			var arm atomic.Bool
			w.Power = review36afOnTransitioning{pw, &arm}
			rec := w.newRec()
			start := clk.Real()
			review36uLoop(t, rec, clk, start.Add(5*time.Minute), start)
			require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
				h.Annotations = map[string]string{reboot.Annotation: ``}
			}))
			at := clk.Real()
			res, err := rec.Reconcile(ctx, "h")
			require.NoError(t, err)
			require.Equal(t, reboot.ActionPowerOff, res.Decision.Power, "the setup: the soft power-off goes out on the On reading (%s)", res.Decision.Reason)
			arm.Store(true)
			review36uLoop(t, rec, clk, at.Add(c.from), at)
			clk.Advance(at.Add(c.from + c.gap).Sub(clk.Real())) // no pass (a busy queue, a store outage, a paused process)
			review36uLoop(t, rec, clk, at.Add(30*time.Minute), at)
			h, err := store.Get(ctx, "h")
			require.NoError(t, err)
			_, pending := h.Annotations[reboot.Annotation]
			require.True(t, pending || pw.WasOffDuring(at, clk.Real()),
				"a bare soft reboot (OS ignores ACPI, BMC reads Transitioning while on) was answered done (annotation removed, LastPoweredOn %v) though the host never went off; the hard fallback was due at SoftTimeout; status %+v; truth %s",
				h.Status.LastPoweredOn, h.Status, rebootcheck.DescribeTruth(pw))
		})
	}
}
