package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// lateHard is a controller whose hard power-off outlives its pass: the
// pass is told busy, and the BMC's answer, unsupported, comes late
// (LateAnswerer), as through kube.Async.
type lateHard struct {
	*fake.Power
	pending *reboot.LateAnswer
}

func (l *lateHard) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		l.pending = &reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: m,
			Err: &power.Error{Op: power.OpName(m), Class: power.ClassUnsupported, Message: "no ForceOff"}}
		return power.ErrBusy
	}
	return l.Power.Off(ctx, m)
}

func (l *lateHard) LateAnswer() (reboot.LateAnswer, bool) {
	if l.pending == nil {
		return reboot.LateAnswer{}, false
	}
	a := *l.pending
	l.pending = nil
	return a, true
}

// TestLateAnswerRecorded (review 36 round 4, with
// kube.TestReview36_AsyncLosesHardUnsupported): a hard power-off answered
// unsupported after its pass was told busy is recorded by the next pass
// (HardUnsupportedAt), which powers off soft; a Tracker told by Late
// fills the same.
func TestLateAnswerRecorded(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pw := &lateHard{Power: fake.NewPower(clk.Real, fake.PowerConfig{})}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: `{"mode":"hard"}`}})
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	var sawHard, sawSoft bool
	for i := 0; i < 20 && !sawSoft; i++ {
		res, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		if res.Decision.Power == reboot.ActionPowerOff {
			if res.Decision.Mode == power.ModeHard {
				sawHard = true
			} else {
				sawSoft = sawHard
				assert.Contains(t, res.Decision.Warnings, reboot.ErrNoHardPowerOff)
			}
		}
		clk.Advance(time.Second)
	}
	require.True(t, sawHard && sawSoft, "the late unsupported answer made the next power-off soft")

	tr := &reboot.Tracker{}
	now := clk.Now()
	rd := reboot.Reading{Host: reboot.Host{Name: "h", Online: true}, Power: power.StateOn, Now: now}
	tr.Observe(rd, reboot.Config{}) // the pass whose call was late
	c := tr.Late(reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeHard,
		Err: &power.Error{Class: power.ClassUnsupported}}, now, 0)
	assert.Equal(t, power.ClassUnsupported, c.Class)
	o := tr.Observe(rd, reboot.Config{})
	assert.Equal(t, now, o.HardUnsupportedAt)
	assert.Equal(t, c, o.LastCall)
}

// TestTrackerLatePressCountsFromAnswer (review 36 round 8, the Tracker's
// side of TestReview36h_LateAnsweredPressCountsFromSending): a press
// answered busy whose success comes late (Late) counts as sent when the
// answer was taken, not at its Sending: it may have reached the BMC at any
// time up to then; its shutdown is not known over by a reading. A late
// answer that says it was refused before the hardware moves nothing.
func TestTrackerLatePressCountsFromAnswer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.Config{StaleReads: 5 * time.Second, OffSettle: time.Second}
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s time.Duration, st power.State) reboot.Observed {
		o := tr.Observe(reboot.Reading{Host: h, Power: st, Now: t0.Add(s), Mono: s, ReadEnd: s, SoftToggles: true}, cfg)
		tr.Applied(reboot.Decision{}, "")
		return o
	}
	read(10*time.Second, power.StateOn)
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, 10*time.Second)
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassBusy}, power.ErrBusy, 10*time.Second)
	read(50*time.Second, power.StateOn)
	tr.Late(reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeSoft}, t0.Add(100*time.Second), 100*time.Second)
	o := read(110*time.Second, power.StateOff)
	assert.Equal(t, 10*time.Second, o.SincePress, "counted from the late answer (100 s), not the Sending (10 s)")
	assert.Equal(t, 10*time.Second, o.SinceOff)
	for s := 111; s < 130; s++ {
		o = read(time.Duration(s)*time.Second, power.StateOff)
	}
	assert.False(t, o.PressOver, "a press answered late is not known returned: only SoftTimeout ends its shutdown")

	// A late answer of a power-off refused before the hardware moves nothing.
	tr.Late(reboot.LateAnswer{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Err: power.ErrAuth}, t0.Add(200*time.Second), 200*time.Second)
	o = read(210*time.Second, power.StateOff)
	assert.Equal(t, 110*time.Second, o.SincePress)
}
