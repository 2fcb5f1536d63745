package reboot_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestOnConfirmed_OnlyFromAReadingThatCannotEcho: Status.OnConfirmed is
// written (equal to LastPoweredOn) only from an On reading taken at least
// StaleReads after the power-on was sent (Observed.QuietFor), never from
// the power-on's record alone, and it is cleared by the next power-on.
func TestOnConfirmed_OnlyFromAReadingThatCannotEcho(t *testing.T) {
	c := reboot.Config{StaleReads: 10 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	on := reboot.Status{LastPoweredOn: t0, LastPoweredOff: t0.Add(-time.Minute), PendingRebootSince: t0.Add(-2 * time.Minute), Format: reboot.StatusFormat}
	now := t0.Add(time.Minute)

	for _, tc := range []struct {
		name  string
		state power.State
		quiet time.Duration
		want  bool
	}{
		{"off (a BMC that refused the power-on)", power.StateOff, time.Minute, false},
		{"unknown", power.StateUnknown, time.Minute, false},
		{"on, but may echo (sent too recently)", power.StateOn, 5 * time.Second, false},
		{"on, cannot echo", power.StateOn, 10 * time.Second, true},
	} {
		d := c.Decide(reboot.Observed{Online: true, Power: tc.state, QuietFor: tc.quiet, Status: on}, now)
		if got := d.Status.OnConfirmed.Equal(on.LastPoweredOn); got != tc.want {
			t.Errorf("%s: OnConfirmed %v (LastPoweredOn %v), want confirmed=%v", tc.name, d.Status.OnConfirmed, on.LastPoweredOn, tc.want)
		}
		if tc.want && !d.UpdateStatus {
			t.Errorf("%s: OnConfirmed decided but not persisted", tc.name)
		}
	}

	// Confirmed, then off again with Online true: the next power-on clears it.
	conf := on
	conf.OnConfirmed = on.LastPoweredOn
	d := c.Decide(reboot.Observed{Online: true, Power: power.StateOff, QuietFor: time.Minute, Status: conf}, now)
	if d.Power != reboot.ActionPowerOn {
		t.Fatalf("precondition: a power-on: %+v", d)
	}
	if !d.Status.OnConfirmed.IsZero() {
		t.Errorf("a new power-on (LastPoweredOn %v) keeps OnConfirmed %v: a client would take it as confirmed", d.Status.LastPoweredOn, d.Status.OnConfirmed)
	}
	// Already confirmed: no write per pass.
	if d := c.Decide(reboot.Observed{Online: true, Power: power.StateOn, QuietFor: time.Minute, Status: conf}, now); d.UpdateStatus {
		t.Errorf("an On host already confirmed is written again: %+v", d)
	}
}
