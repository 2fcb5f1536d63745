package reboot_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// review40alLeaderPress runs a leader's Tracker (clocks correct) on a held
// host whose BMC presses for a soft power-off, until a press has returned
// and a later pass wrote Status.ActingSince. It returns the host record
// and the wall-clock instant the last call returned.
func review40alLeaderPress(t *testing.T, cfg reboot.Config, t0 time.Time) (reboot.Host, time.Time) {
	h := reboot.Host{Name: "h", Online: true, Version: "1", Annotations: map[string]string{reboot.AnnotationPrefix + "fence": ""},
		Status: reboot.Status{Format: reboot.StatusFormat}}
	tr := reboot.NewTracker(0, t0)
	mono, wall := 10*time.Second, t0.Add(10*time.Second)
	var pressed bool
	var lastReturned time.Time
	for pass := 0; pass < 60; pass++ {
		o := tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: wall, Mono: mono, ReadEnd: mono, SoftToggles: true}, cfg)
		d := cfg.Decide(o, wall)
		if d.UpdateStatus {
			tr.Writing(d)
			h.Status = d.Status
			h.Version += "x"
			tr.Applied(d, h.Version)
		} else {
			tr.Applied(d, "")
		}
		if d.Power != reboot.ActionNone {
			tr.Sending(d.Power, d.Mode, mono)
			mono += time.Second
			wall = wall.Add(time.Second)
			pressed = pressed || d.Power == reboot.ActionPowerOff
			lastReturned = wall
			tr.Sent(reboot.Call{Action: d.Power, Mode: d.Mode, At: wall}, nil, mono)
		}
		if pressed && !h.Status.ActingSince.IsZero() && !h.Status.LastPress.IsZero() {
			return h, lastReturned
		}
		mono += time.Second
		wall = wall.Add(time.Second)
	}
	t.Fatalf("setup: no press sent (%v) or no ActingSince written (%+v)", pressed, h.Status)
	return h, lastReturned
}

// TestReview40al_StandbyStartedWithClockAheadCountsPressHourEarly: the
// mirror of round 33's fix. A standby's Tracker (or Reconciler) converts
// a Status.ActingSince to its monotonic clock by the offset taken at its
// start only (quiet.go actedBound.bound: start - startWall.Sub(v)). A
// controller that started with its wall clock an hour ahead (a host
// booted with its RTC off, the controller started before NTP stepped the
// clock back a minute later: ordinary at boot) dates by an hour early
// every press another leader's ActingSince bounds, for its whole life,
// although its clock agrees with the leader's when it reads the status.
// Here the other leader's press returned 3 s before this controller
// leads; its first leading pass counts it as sent an hour ago (SincePress,
// SinceOff), so the LostLanding wait of A5 (no power-off while a press that
// may have been lost may still land) is skipped. Round 33 made
// quietSince (mono -> wall) take the later of the start offset and the
// now offset; bound (wall -> mono) still takes the start offset alone,
// which a wall-clock step since the start moves early. Ground truth: the
// wall clock at which the leader's press returned (both clocks agree
// then). The same controller with a correct clock at its start counts
// 3 s (the control subtest passes).
func TestReview40al_StandbyStartedWithClockAheadCountsPressHourEarly(t *testing.T) {
	for _, ahead := range []time.Duration{0, time.Hour} {
		t.Run(ahead.String(), func(t *testing.T) {
			cfg := reboot.DefaultConfig()
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			h, returned := review40alLeaderPress(t, cfg, t0)
			// The standby started at t0 (mono 0) reading t0+ahead; its
			// clock was stepped back to the true time at t0+1min.
			tr := reboot.NewTracker(0, t0.Add(ahead))
			tr.Standby()
			mono := func(w time.Time) time.Duration { return w.Sub(t0) }
			w1 := returned.Add(time.Second)
			tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: w1, Mono: mono(w1), ReadEnd: mono(w1), SoftToggles: true}, cfg)
			w2 := w1.Add(time.Second) // the old leader's lease ended: this one leads
			tr.Leading(mono(w2))
			w3 := w2.Add(time.Second)
			o := tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: w3, Mono: mono(w3), ReadEnd: mono(w3), SoftToggles: true}, cfg)
			d := cfg.Decide(o, w3)
			t.Logf("status LastPress %v ActingSince %v (press returned %v); leading pass: SincePress %v SinceOff %v; decision %v %v %s",
				h.Status.LastPress.Sub(t0), h.Status.ActingSince.Sub(t0), returned.Sub(t0), o.SincePress, o.SinceOff, d.Power, d.Mode, d.Reason)
			truth := w3.Sub(returned)
			if limit := truth + cfg.Precision; o.SincePress > limit || o.SinceOff > limit {
				t.Errorf("the new leader counts the other leader's press, returned %v ago on both clocks, as sent %v ago (SincePress; SinceOff %v): its clock ran %v ahead at its start only",
					truth, o.SincePress, o.SinceOff, ahead)
			}
		})
	}
}
