package reboot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestTrackerStandbyCountsFromLeading: a Tracker told Standby counts
// another leader's LastPress and LastPoweredOn as sent at every pass
// (never aged, whatever it read before), and Leading(at) counts them from
// at, as the Reconciler does with its Guard
// (TestReview36_StandbyCountsOtherLeadersPressFromItsWrite).
func TestTrackerStandbyCountsFromLeading(t *testing.T) {
	wall := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	h := reboot.Host{Name: "h", Online: true, Version: "1",
		Status: reboot.Status{LastPress: wall.Add(-time.Hour), LastPoweredOn: wall.Add(-time.Hour)}}
	rd := func(mono time.Duration) reboot.Reading {
		return reboot.Reading{Host: h, Power: power.StateOn, Now: wall.Add(mono), Mono: mono}
	}
	tr := &reboot.Tracker{}
	tr.Standby()
	for _, m := range []time.Duration{0, time.Minute, 10 * time.Minute} {
		o := tr.Observe(rd(m), cfg)
		tr.Applied(reboot.Decision{}, "")
		assert.Zero(t, o.SincePress, "standby pass at %v: the press counts as sent now", m)
		assert.Zero(t, o.SinceOff, "standby pass at %v", m)
		assert.Zero(t, o.QuietFor, "standby pass at %v: the power-on counts as sent now", m)
	}
	tr.Leading(11 * time.Minute)
	tr.Leading(12 * time.Minute) // already leading: nothing
	o := tr.Observe(rd(15*time.Minute), cfg)
	assert.Equal(t, 4*time.Minute, o.SincePress, "counted from the leadership's start")
	assert.Equal(t, 4*time.Minute, o.SinceOff)
	assert.Equal(t, 4*time.Minute, o.QuietFor)

	// Without Standby the Tracker leads from its start: a value read in
	// its first pass is known since then.
	tr = reboot.NewTracker(0, wall)
	tr.Observe(rd(time.Minute), cfg)
	o = tr.Observe(rd(10*time.Minute), cfg)
	assert.Equal(t, 10*time.Minute, o.SincePress)
	assert.Equal(t, 10*time.Minute, o.QuietFor)
}
