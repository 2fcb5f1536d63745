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

// lostSoftOff is an IPMI-like power.Controller (power/ipmi): a soft
// shutdown is skipped when its own read says Off, is sent once, and on a
// BMC that implements it as a press of the power button (fake.ButtonSoft)
// toggles the hardware. The answer to the first soft shutdown is lost: the
// adapter returns what power/ipmi returns then (ipmi.go: class busy, "the
// answer to the soft shutdown was lost ... it may have been carried out"),
// and the BMC applies it land later (a queued datagram, a busy BMC).
type lostSoftOff struct {
	*fake.Power
	clk     *fake.Clock
	land    time.Duration
	lost    bool
	pending bool
	landAt  time.Time
}

func (l *lostSoftOff) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeSoft {
		if s, err := l.Power.State(ctx); err == nil && s == power.StateOff {
			return nil // ipmi.go: a soft shutdown is skipped on an Off read
		}
		if !l.lost {
			l.lost, l.pending, l.landAt = true, true, l.clk.Real().Add(l.land)
			return &power.Error{Op: power.OpName(m), Class: power.ClassBusy,
				Message: "the answer to the soft shutdown was lost (timeout); it may have been carried out, and a second one may be a press of the power button: nothing more was sent"}
		}
	}
	return l.Power.Off(ctx, m)
}

// Review 36 round 12 (TestReview36l_IPMILostSoftOffLandingLateThenSlowShutdown):
// the reboot package counts a press whose answer was lost from the call's
// return, for SoftTimeout + StaleReads (tracker.go sentOff:
// lastPress = max(lastPress, done); decide.go pressWait), and reboot/doc.go
// calls that return "the latest it may have reached the hardware". The
// IPMI adapter relies on exactly that window for its soft shutdown whose
// answer was lost (ipmi.go ~495: "the reboot package sends a press only
// on an On reading taken SoftTimeout + StaleReads after its last
// power-off"). But the same round (7405882) grants the Redfish adapter a
// BMC that applies an unanswered reset up to LostLanding (default
// SoftTimeout) after its return, and blocks presses for LostLanding +
// SoftTimeout + StaleReads; nothing in A1–A4 bounds when a lost command
// lands, and nothing in the reboot package or power/ipmi accounts for it.
//
// Here (IPMI-like BMC whose soft shutdown is a press): an Online=false
// enforcement sends a soft shutdown at 0 whose answer is lost; Online is
// set true at 5 s (the enforcement ends); the BMC applies the press 20 s
// after the return (within the LostLanding the adapter doc grants); the OS
// takes 170 s (< SoftTimeout 180 s): the hardware is off at 190 s; reads
// are 29 s old (< StaleReads 30 s). A client asks a keyed (held) soft
// reboot at 100 s: a new work, still soft at 210 s, when SoftTimeout +
// StaleReads after the lost press's return have passed. The controller
// reads On (an echo of 181 s) and the adapter, reading On too, sends the
// soft shutdown: a press on a host off since 190 s powers it on while the
// client's keyed annotation holds it off (ground truth: a command powers
// the hardware on after the request).
func TestReview36l_IPMILostSoftOffLandingLateThenSlowShutdown(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	pw := &lostSoftOff{clk: clk, land: 20 * time.Second, Power: review36SlowShutdown(clk)}
	w.Power = pw
	rec := w.newRec()
	clk.Advance(time.Minute)
	// The controller runs for a while first (a fresh one counts the host
	// as possibly powered on at its start).
	start := clk.Real().Add(5 * time.Minute)
	onlineAt, requestAt := start.Add(5*time.Second), start.Add(100*time.Second)
	landed, _ := review36LostRun{start: start, end: start.Add(6 * time.Minute), onlineAt: onlineAt, requestAt: requestAt}.
		run(t, clk, w.store, rec, pw, pw.Power)
	require.True(t, pw.lost && !landed.IsZero(), "the setup: a soft shutdown's answer was lost and it landed later")
	if tc, ok := review36OnByCommandAfter(pw.Power, requestAt); ok {
		t.Fatalf("a press on an On reading that echoed the host still shutting down from a lost soft shutdown (its answer lost at 0, landed at %v, OS 170 s) powered the held host on at %v, a keyed annotation present since %v; truth %s",
			landed.Sub(start), tc.At.Sub(start), requestAt.Sub(start), rebootcheck.DescribeTruth(pw.Power))
	}
	require.True(t, review36OffAfter(pw.Power, landed), "the setup: the lost press shut the host down; truth %s", rebootcheck.DescribeTruth(pw.Power))
}

// Review 36 round 12 (TestReview36l_TrackerForgetBeforeSendingDropsPress):
// de12057 makes the Reconciler note a power call sent after a Forget in
// the memory current when it is sent, as a press if the pass's reading
// said its mode toggles (reconciler.go: press := o.toggles(d.Mode), o the
// pass's Observed, which Forget does not touch). Tracker.Sending decides
// "press" from t.o (tracker.go Sending: t.press = t.o.toggles(m)), and
// Tracker.Forget replaces the whole Tracker (`*t = nt`, o zero): a press
// announced by Sending after a Forget in the same pass (Observe, Applied,
// Forget, Sending, Sent) is recorded as a power-off that does not press.
// Tracker.Sending promises "A power-off counts as a press of the power
// button if the pass's Reading said mode m toggles". The press (a slow
// BMC: 20 s from sending to its answer) then counts from the Forget, not
// from its return: SincePress is 20 s too long, and a press is allowed
// SoftTimeout + StaleReads after the Forget, while the OS may still be
// shutting down from a press that reached the hardware 20 s later.
func TestReview36l_TrackerForgetBeforeSendingDropsPress(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	tr := reboot.NewTracker(clk.Monotonic(), clk.Now())
	h := reboot.Host{Name: "h", Online: false, Version: "1"}
	clk.Advance(10 * time.Minute)
	rd := reboot.Reading{Host: h, Power: power.StateOn, Now: clk.Now(), Mono: clk.Monotonic(), ReadEnd: clk.Monotonic(),
		SoftToggles: true, HardToggles: true}
	d := cfg.Decide(tr.Observe(rd, cfg), rd.Now)
	tr.Applied(d, "")
	// The host is forgotten (deleted and listed again) during the pass,
	// before its press goes out.
	tr.Forget(clk.Monotonic(), clk.Now())
	forgot := clk.Monotonic()
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, clk.Monotonic())
	clk.Advance(20 * time.Second) // a slow BMC answers the press
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassNone, At: clk.Now()}, nil, clk.Monotonic())
	returned := clk.Monotonic()
	clk.Advance(cfg.SoftTimeout + cfg.StaleReads - 10*time.Second)
	rd = reboot.Reading{Host: h, Power: power.StateOn, Now: clk.Now(), Mono: clk.Monotonic(), ReadEnd: clk.Monotonic(),
		SoftToggles: true, HardToggles: true}
	o := tr.Observe(rd, cfg)
	d = cfg.Decide(o, rd.Now)
	if since := clk.Monotonic() - returned; o.SincePress > since {
		t.Fatalf("a press sent after Tracker.Forget (the pass's Reading said soft toggles) was not recorded as a press: SincePress %v counts from the Forget (%v ago), not from the press's return (%v ago); the decision %v %v (%s) on an On reading %v after the press returned, < SoftTimeout + StaleReads",
			o.SincePress, clk.Monotonic()-forgot, since, d.Power, d.Mode, d.Reason, since)
	}
}
