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
// (TestReview36_StandbyCountsOtherLeadersPressFromItsWrite). This
// Tracker did not see those calls answered, so the press and power-off
// count as sent LostLanding later still (A5,
// TestReview36m_SecondReconcilerTakesOverAfterLostSoftOff).
func TestTrackerStandbyCountsFromLeading(t *testing.T) {
	wall := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	ll := reboot.LostLandingOf(cfg)
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
		assert.Equal(t, -ll, o.SincePress, "standby pass at %v: the press counts as sent now (+ LostLanding)", m)
		assert.Equal(t, -ll, o.SinceOff, "standby pass at %v", m)
		assert.Zero(t, o.QuietFor, "standby pass at %v: the power-on counts as sent now", m)
	}
	tr.Leading(11 * time.Minute)
	tr.Leading(12 * time.Minute) // already leading: nothing
	o := tr.Observe(rd(15*time.Minute), cfg)
	assert.Equal(t, 4*time.Minute-ll, o.SincePress, "counted from the leadership's start (+ LostLanding)")
	assert.Equal(t, 4*time.Minute-ll, o.SinceOff)
	assert.Equal(t, 4*time.Minute, o.QuietFor)

	// Without Standby the Tracker leads from its start: a value read in
	// its first pass is known since then.
	tr = reboot.NewTracker(0, wall)
	tr.Observe(rd(time.Minute), cfg)
	o = tr.Observe(rd(10*time.Minute), cfg)
	assert.Equal(t, 10*time.Minute-ll, o.SincePress, "a previous process's press: from the start + LostLanding")
	assert.Equal(t, 10*time.Minute, o.QuietFor)
}

// TestTrackerPassReadBeforeLeadingIsStandby (review 36 round 8, the
// Tracker's side of TestReview36h_ConcurrentLeadDatesForeignPressBeforeHold):
// a caller that shares one Guard among its hosts tells every Tracker
// Leading when any Hold begins the leadership, while another host's pass
// may have read its clocks before: that pass (Mono before the Leading's
// mono) is a standby pass, and another leader's press and power-on it
// reads count as sent when the leadership began, not at its Mono.
func TestTrackerPassReadBeforeLeadingIsStandby(t *testing.T) {
	wall := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	ll := reboot.LostLandingOf(cfg) // another leader's press may have been lost (A5)
	h := reboot.Host{Name: "h", Online: true, Version: "1"}
	rd := func(mono time.Duration) reboot.Reading {
		return reboot.Reading{Host: h, Power: power.StateOn, Now: wall.Add(mono), Mono: mono}
	}
	tr := &reboot.Tracker{}
	tr.Standby()
	tr.Observe(rd(0), cfg) // standing by, nothing recorded yet
	tr.Applied(reboot.Decision{}, "")
	// The other leader records a press and a power-on; this pass reads
	// its clocks at 10 s, and the leadership begins (another host's Hold)
	// at 20 s, before Observe.
	h.Version = "2"
	h.Status.LastPress, h.Status.LastPoweredOn = wall.Add(9*time.Second), wall.Add(9*time.Second)
	tr.Leading(20 * time.Second)
	o := tr.Observe(rd(10*time.Second), cfg)
	tr.Applied(reboot.Decision{}, "")
	assert.Equal(t, -ll, o.SincePress, "the pass read before the leadership began counts the press as sent now (+ LostLanding)")
	assert.Zero(t, o.QuietFor)
	o = tr.Observe(rd(30*time.Second), cfg)
	assert.Equal(t, 10*time.Second-ll, o.SincePress, "counted from the leadership's start (20 s), not from the pass at 10 s")
	assert.Equal(t, 10*time.Second-ll, o.SinceOff)
	assert.Equal(t, 10*time.Second, o.QuietFor)
}
