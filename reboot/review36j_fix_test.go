package reboot_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestTrackerForgetDuringPressCountsItFromItsReturn (review 36 round 10,
// the Tracker's side of TestReview36j_ForgetDuringPressCountsItFromForget):
// a press announced by Sending, the Tracker forgotten before Sent reports
// its return, counts from that return, not from the Forget. (Before:
// Forget dropped the call in progress, so Sent recorded it as no press and
// SincePress counted from the Forget.)
func TestTrackerForgetDuringPressCountsItFromItsReturn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s time.Duration) reboot.Observed {
		return tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: t0.Add(s), Mono: s, SoftToggles: true}, cfg)
	}
	read(10 * time.Second)
	tr.Applied(reboot.Decision{}, "")
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, 10*time.Second)
	tr.Forget(15*time.Second, t0.Add(15*time.Second))
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft}, nil, 100*time.Second)
	if o := read(120 * time.Second); o.SincePress != 20*time.Second || o.SinceOff != 20*time.Second {
		t.Fatalf("the press returned at 100 s, the Tracker forgotten at 15 s: SincePress %v, SinceOff %v at 120 s, want 20s (from its return)", o.SincePress, o.SinceOff)
	}
}

// TestSoftFailureCountsForItsWorkNotItsTime (review 36 round 10, findings
// 1 and 2 at the level of Decide): a soft power-off's failure escalates
// the work it was decided for (Decision.For, given to Call.For), whatever
// the times: not a reboot stamped, truncated to Config.Precision, in the
// same second as an Online=false enforcement's failed call, and not a
// reboot when the failed call's work is unknown (zero For: a late answer
// of a call made before the controller's memory began).
func TestSoftFailureCountsForItsWorkNotItsTime(t *testing.T) {
	s := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	off := reboot.Observed{Online: false, Power: power.StateOn, SinceOff: time.Hour, SincePress: time.Hour, QuietFor: time.Hour}
	d := cfg.Decide(off, s.Add(100*time.Millisecond))
	if d.Power != reboot.ActionPowerOff || d.For != (reboot.Work{Since: s, N: 1}) {
		t.Fatalf("the enforcement's power-off: %v, For %+v, want one for Online=false since %v (%s)", d.Power, d.For, s, d.Reason)
	}
	enforcement := d.For
	failed := reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassFailed, At: s.Add(900 * time.Millisecond), For: enforcement}
	rb := reboot.Observed{Annotations: map[string]string{reboot.Annotation: ""}, Online: true, Power: power.StateOn,
		Changed: true, SinceOff: time.Hour, SincePress: time.Hour, QuietFor: time.Hour, LastCall: failed}
	d = cfg.Decide(rb, s.Add(400*time.Millisecond))
	if !d.Status.PendingRebootSince.Equal(s) || d.Power != reboot.ActionPowerOff || d.Mode != power.ModeSoft {
		t.Fatalf("a reboot begun in the second of an enforcement's failed soft power-off: pending since %v, %v %v (%s); want soft, since %v",
			d.Status.PendingRebootSince, d.Power, d.Mode, d.Reason, s)
	}
	if d.For != (reboot.Work{Reboot: true, Since: s, N: 1}) {
		t.Fatalf("the reboot's power-off For %+v", d.For)
	}
	own := d.For
	rb.Status, rb.Changed = d.Status, false
	rb.LastCall.For = reboot.Work{}
	if d = cfg.Decide(rb, s.Add(2*time.Second)); d.Mode != power.ModeSoft {
		t.Fatalf("a soft failure of unknown work escalated the reboot: %v %v (%s)", d.Power, d.Mode, d.Reason)
	}
	rb.LastCall.For = own
	if d = cfg.Decide(rb, s.Add(2*time.Second)); d.Power != reboot.ActionPowerOff || d.Mode != power.ModeHard {
		t.Fatalf("the reboot's own soft failure: %v %v (%s), want hard", d.Power, d.Mode, d.Reason)
	}
}
