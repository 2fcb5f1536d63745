package reboot_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
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

// review40alGuard admits only the process named by *leader.
type review40alGuard struct {
	me     int
	leader *int
}

func (g review40alGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if *g.leader != g.me {
		return nil, nil, fmt.Errorf("process %d: %w", g.me, reboot.ErrNotLeader)
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// TestReview40al_NewLeaderStartedClockAheadPowersHeldHostOn: the
// Reconciler form of the test above, against ground truth. Two
// controllers share a Guard; B started with its wall clock an hour ahead
// (stepped back a minute later, before anything of note) and stands by.
// A leads; a keyed (held) request comes; A's soft power-off is a press
// (fake.ButtonAll) whose answer is lost (timeout) and which the BMC
// carries out 2 minutes later (within LostLanding, A5). A writes
// Status.ActingSince once the call returned, then dies; B leads 5 s
// later (B's standby passes come every 10 s: the last one before it
// leads read the status with that ActingSince). B converts that ActingSince to its monotonic clock by its
// start's offset (actedBound.bound), an hour early, so it counts A's
// possibly lost press as landed long ago and presses itself at once
// (the host reads On: the late press has not landed); A's press lands
// after it and powers the held host on. With B's clock right at its start
// it waits LostLanding and the host stays off (the control subtest).
func TestReview40al_NewLeaderStartedClockAheadPowersHeldHostOn(t *testing.T) {
	for _, ahead := range []time.Duration{0, time.Hour} {
		t.Run(ahead.String(), func(t *testing.T) { review40alNewLeader(t, ahead) })
	}
}

func review40alNewLeader(t *testing.T, ahead time.Duration) {
	ctx := context.Background()
	w := newReview36World()
	clk, cfg := w.clk, w.cfg
	lost := false
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true},
		Faults: func(c fake.Call) fake.Fault {
			if c.Op == fake.OpOff && !lost {
				lost = true
				return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 2 * time.Minute}
			}
			return fake.Fault{}
		}})
	leader := 1
	pc := func(string) (power.Controller, error) { return pw, nil }
	a := &reboot.Reconciler{Hosts: w.store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Power: pc,
		Guard: review40alGuard{me: 1, leader: &leader}}
	stepped := clk.Real().Add(time.Minute)
	bNow := func() time.Time {
		if clk.Real().Before(stepped) {
			return clk.Now().Add(ahead)
		}
		return clk.Now()
	}
	b := &reboot.Reconciler{Hosts: w.store, Now: bNow, Monotonic: clk.Monotonic, Config: cfg, Power: pc,
		Guard: review40alGuard{me: 2, leader: &leader}}
	step := func(r *reboot.Reconciler) reboot.Result {
		res, err := r.Reconcile(ctx, "h")
		if err != nil && !errors.Is(err, reboot.ErrNotLeader) {
			require.NoError(t, err)
		}
		if res.Decision.Power != reboot.ActionNone {
			t.Logf("%v: %s %v %v %s err %v on=%v", clk.Real().Format(time.TimeOnly), map[*reboot.Reconciler]string{a: "A", b: "B"}[r],
				res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr, pw.HardwareOn())
		}
		return res
	}
	for i := 0; i < 10; i++ { // both run for a while
		step(a)
		step(b)
		clk.Advance(time.Minute)
	}
	requestAt := clk.Real()
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": ""}
	}))
	var aDied time.Time
	for end := requestAt.Add(20 * time.Minute); clk.Real().Before(end); clk.Advance(time.Second) {
		if aDied.IsZero() {
			step(a)
			if st, err := w.store.Get(ctx, "h"); err == nil && lost && !st.Status.ActingSince.IsZero() {
				aDied = clk.Real()
				t.Logf("A wrote ActingSince %v (LastPress %v) and dies", st.Status.ActingSince.Format(time.TimeOnly), st.Status.LastPress.Format(time.TimeOnly))
			}
		}
		if !aDied.IsZero() && clk.Real().Sub(aDied) >= 5*time.Second {
			leader = 2
		}
		if leader != 2 && clk.Real().Second()%10 != 5 {
			continue // a standby's passes come every 10 s (its requeue)
		}
		st0, _ := w.store.Get(ctx, "h")
		res := step(b)
		if !aDied.IsZero() && clk.Real().Sub(aDied) < 20*time.Second {
			t.Logf("%v B (read acting %v press %v fmt %d): %v %v %s", clk.Real().Format(time.TimeOnly), st0.Status.ActingSince.Format(time.TimeOnly), st0.Status.LastPress.Format(time.TimeOnly), st0.Status.Format, res.Decision.Power, res.Decision.Mode, res.Decision.Reason)
		}
	}
	require.False(t, aDied.IsZero(), "setup: A's lost press and its ActingSince")
	if tc, ok := review36OnByCommandAfter(pw, requestAt); ok {
		t.Errorf("the held host was powered on at %v (request at %v, A's lost press returned before %v): truth %s",
			tc.At.Format(time.TimeOnly), requestAt.Format(time.TimeOnly), aDied.Format(time.TimeOnly), rebootcheck.DescribeTruth(pw))
	}
	require.False(t, pw.HardwareOn(), "the held host is on at the end; truth %s", rebootcheck.DescribeTruth(pw))
}
