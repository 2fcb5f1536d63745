package reboot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestSoftFailureOfEarlierWorkIsNotThisOnes (review 36 round 8, low (b)):
// a soft power-off that failed before the reboot (or the Online=false
// enforcement) began, left as the last call (Online set back to true while
// the host still ran: no call since), says nothing of this one: its soft
// power-off is tried, not turned into a hard cut at once. One that failed
// since it began still escalates. (Before: pending and idle read the
// failure from LastCall whatever its time, and cut the power at once.)
// Round 10: a failure counts for the work its call was decided for
// (Call.For, from Decision.For), not by its time.
func TestSoftFailureOfEarlierWorkIsNotThisOnes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg := reboot.DefaultConfig()
	failed := func(at time.Time, w reboot.Work) reboot.Call {
		return reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassFailed, At: at, For: w}
	}
	reboot0 := reboot.Observed{Annotations: map[string]string{reboot.Annotation: ""}, Online: true,
		Power: power.StateOn, Changed: true, SinceOff: time.Hour, SincePress: time.Hour, QuietFor: time.Hour}

	o := reboot0
	o.LastCall = failed(t0.Add(-time.Hour), reboot.Work{Reboot: true, Since: t0.Add(-2 * time.Hour)})
	d := cfg.Decide(o, t0)
	assert.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	assert.Equal(t, power.ModeSoft, d.Mode, "a new soft reboot is tried soft: the failure was an earlier one's (%s)", d.Reason)

	// The same reboot's soft power-off failed: hard now.
	st := d.Status
	o = reboot0
	o.Status, o.Changed = st, false
	o.LastCall = failed(t0.Add(time.Second), d.For)
	d = cfg.Decide(o, t0.Add(2*time.Second))
	assert.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	assert.Equal(t, power.ModeHard, d.Mode, "this reboot's soft power-off failed: fall back to hard (%s)", d.Reason)

	// Online=false: an earlier enforcement's failure does not make this
	// one hard at once; its own does.
	offline := reboot.Observed{Online: false, Power: power.StateOn, SinceOff: time.Hour, SincePress: time.Hour,
		QuietFor: time.Hour, LastCall: failed(t0.Add(-time.Hour), reboot.Work{Since: t0.Add(-2 * time.Hour)})}
	d = cfg.Decide(offline, t0)
	assert.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	assert.Equal(t, power.ModeSoft, d.Mode, "Online=false is enforced soft first (%s)", d.Reason)
	offline.Status = d.Status
	offline.LastCall = failed(t0.Add(time.Second), d.For)
	d = cfg.Decide(offline, t0.Add(2*time.Second))
	assert.Equal(t, reboot.ActionPowerOff, d.Power, d.Reason)
	assert.Equal(t, power.ModeHard, d.Mode, "its own soft power-off failed: hard (%s)", d.Reason)
}
