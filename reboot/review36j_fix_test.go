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
