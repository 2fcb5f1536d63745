package reboot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestTrackerLateAnswerKeepsTimedOutPress (A5, review 36 round 13
// finding 2): a late answer settles only the call in flight it is taken
// for. A press whose call ended in its own deadline (it is over: no late
// answer will come for it, but the BMC may still apply it) stays lost when
// a later power-off, answered busy and still running in the background,
// gets its late answer: it counts as sent LostLanding after its return.
// And a late answer that is itself lost counts LostLanding from when it
// was taken, while an answered 409 counts from its return only.
func TestTrackerLateAnswerKeepsTimedOutPress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.Config{StaleReads: 5 * time.Second}
	ll := reboot.LostLandingOf(cfg)
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s time.Duration) reboot.Observed {
		o := tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: t0.Add(s), Mono: s, ReadEnd: s, SoftToggles: true}, cfg)
		tr.Applied(reboot.Decision{}, "")
		return o
	}
	read(10 * time.Second)
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, 10*time.Second) // a press
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassBusy},
		fmt.Errorf("soft off: %w", context.DeadlineExceeded), 12*time.Second)
	read(20 * time.Second)
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, 20*time.Second) // not a press
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, Class: power.ClassBusy},
		&power.Error{Op: "off hard", Class: power.ClassBusy, Err: power.ErrBusy, Message: "still running"}, 21*time.Second)
	tr.Late(reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeHard}, t0.Add(30*time.Second), 30*time.Second)
	o := read(40 * time.Second)
	assert.Equal(t, 40*time.Second-12*time.Second-ll, o.SincePress, "the timed-out press still counts LostLanding after its return")

	// A late answer that is itself lost: LostLanding after it was taken.
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, 300*time.Second)
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, Class: power.ClassBusy},
		&power.Error{Op: "off hard", Class: power.ClassBusy, Err: power.ErrBusy, Message: "still running"}, 301*time.Second)
	tr.Late(reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeHard,
		Err: &power.Error{Op: "off hard", Class: power.ClassBusy, Message: "the answer was lost"}}, t0.Add(320*time.Second), 320*time.Second)
	o = read(330 * time.Second)
	assert.Equal(t, 10*time.Second-ll, o.SinceOff, "a lost late answer counts LostLanding after it was taken")

	// An answered 409: from its return, not LostLanding later.
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, 1000*time.Second)
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, Class: power.ClassBusy},
		&power.Error{Op: "off hard", Class: power.ClassBusy, Status: 409, Err: power.ErrBusy}, 1001*time.Second)
	o = read(1011 * time.Second)
	assert.Equal(t, 10*time.Second, o.SinceOff, "an answered busy is not lost")
}
