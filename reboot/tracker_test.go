package reboot_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// trackerPass is one pass of a caller that runs Decide itself with a
// Tracker, in the order Tracker's doc gives.
func trackerPass(ctx context.Context, tr *reboot.Tracker, cfg reboot.Config, hosts reboot.HostStore,
	pc power.Controller, now func() time.Time, mono func() time.Duration, name string) (reboot.Decision, error) {
	h, err := hosts.Get(ctx, name)
	if err != nil {
		return reboot.Decision{}, err
	}
	rd := reboot.Reading{Host: h, Now: now(), Mono: mono()}
	if rd.Power, err = pc.State(ctx); err != nil {
		rd.Power = power.StateUnknown
	}
	rd.ReadEnd = mono()
	if t, ok := pc.(reboot.Toggler); ok {
		rd.SoftToggles, rd.HardToggles = t.TogglesOff(power.ModeSoft), t.TogglesOff(power.ModeHard)
	}
	if t, ok := pc.(reboot.OnToggler); ok {
		rd.OnToggles = t.TogglesOn() // as the Reconciler asks (togglesOn)
	}
	d := cfg.Decide(tr.Observe(rd, cfg), rd.Now)
	written := ""
	if d.UpdateStatus {
		nh := h
		nh.Status = d.Status
		nh.Annotations = map[string]string{}
		for k, v := range h.Annotations {
			nh.Annotations[k] = v
		}
		for _, k := range d.RemoveAnnotations {
			delete(nh.Annotations, k)
		}
		tr.Writing(d)
		w, err := hosts.Update(ctx, nh)
		if err != nil {
			return d, err
		}
		written = w.Version
	}
	tr.Applied(d, written)
	if d.Power != reboot.ActionNone {
		tr.Sending(d.Power, d.Mode, mono())
		if d.Power == reboot.ActionPowerOn {
			err = pc.On(ctx)
		} else {
			err = pc.Off(ctx, d.Mode)
		}
		tr.Sent(reboot.Call{Action: d.Power, Mode: d.Mode, Class: reboot.CallClass(err), At: now()}, err, mono())
	}
	return d, nil
}

// TestTrackerMatchesReconciler drives two identical hosts, one with the
// Reconciler and one with Decide and a Tracker, through the same requests,
// second writer, restarts, clock and BMC faults (power buttons included): every decision must be the same, so
// the Tracker fills Observed as the Reconciler does.
func TestTrackerMatchesReconciler(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		pcfg := fake.PowerConfig{
			Lag:       time.Duration(rapid.IntRange(0, 5).Draw(rt, "lag")) * time.Second,
			SoftDelay: time.Duration(rapid.IntRange(0, 8).Draw(rt, "softDelay")) * time.Second,
			Report: fake.Report{
				Stale:   time.Duration(rapid.IntRange(0, 4).Draw(rt, "stale")) * time.Second,
				Unknown: rapid.SampledFrom([]float64{0, 0.3}).Draw(rt, "unknown"),
				Seed:    1,
			},
			IgnoreSoft: rapid.Bool().Draw(rt, "ignoreSoft"),
			Button:     fake.ButtonKind(rapid.IntRange(0, 2).Draw(rt, "button")), // Toggler answers
		}
		if pcfg.Button == fake.ButtonAll {
			pcfg.IgnoreSoft = false
		}
		cfg := reboot.Config{StaleReads: 5 * time.Second,
			OffSettle: time.Duration(rapid.IntRange(0, 3).Draw(rt, "settle")) * time.Second}
		pa, pb := fake.NewPower(clk.Real, pcfg), fake.NewPower(clk.Real, pcfg)
		hosts := fake.NewRebootHosts(reboot.Host{Name: "a", Online: true}, reboot.Host{Name: "b", Online: true})
		r := &reboot.Reconciler{Hosts: hosts, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return pa, nil }}
		tr := &reboot.Tracker{} // starts at its first pass, as the Reconciler does
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0: // a client asks for a reboot
				k := rapid.SampledFrom([]string{reboot.Annotation, reboot.AnnotationPrefix + "x"}).Draw(rt, "key")
				v := rapid.SampledFrom([]string{"", `{"mode":"hard"}`}).Draw(rt, "value")
				for _, n := range []string{"a", "b"} {
					_ = hosts.Mutate(n, func(h *reboot.Host) {
						if h.Annotations == nil {
							h.Annotations = map[string]string{}
						}
						h.Annotations[k] = v
					})
				}
			case 1: // releases, or a second writer touches the record
				drop := rapid.Bool().Draw(rt, "drop")
				for _, n := range []string{"a", "b"} {
					_ = hosts.Mutate(n, func(h *reboot.Host) {
						if drop {
							delete(h.Annotations, reboot.AnnotationPrefix+"x")
						}
					})
				}
			case 2:
				on := rapid.Bool().Draw(rt, "online")
				for _, n := range []string{"a", "b"} {
					_ = hosts.Mutate(n, func(h *reboot.Host) { h.Online = on })
				}
			case 3: // the same fault on the next call of both
				f := fake.Fault{Kind: fake.FaultKind(rapid.IntRange(2, 4).Draw(rt, "fault")), Applied: rapid.Bool().Draw(rt, "applied")}
				op := rapid.SampledFrom([]fake.Op{fake.OpOn, fake.OpOff}).Draw(rt, "faultOp")
				pa.FailNext(op, f)
				pb.FailNext(op, f)
			case 4: // both restart: what they remembered is lost
				r = &reboot.Reconciler{Hosts: hosts, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
					Power: func(string) (power.Controller, error) { return pa, nil }}
				tr = &reboot.Tracker{}
			default:
				clk.Advance(time.Duration(rapid.IntRange(0, 20000).Draw(rt, "ms")) * time.Millisecond)
			}
			res, err := r.Reconcile(ctx, "a")
			if err != nil {
				rt.Fatalf("step %d: reconcile: %v", i, err)
			}
			d, err := trackerPass(ctx, tr, cfg, hosts, pb, clk.Now, clk.Monotonic, "b")
			if err != nil {
				rt.Fatalf("step %d: tracker pass: %v", i, err)
			}
			ra := res.Decision
			if ra.Phase != d.Phase || ra.Power != d.Power || ra.Mode != d.Mode || ra.RequeueAfter != d.RequeueAfter ||
				ra.UpdateStatus != d.UpdateStatus || !ra.Status.Equal(d.Status) || ra.Reason != d.Reason {
				rt.Fatalf("step %d: the Reconciler decided %s/%s %q after %v, the Tracker's caller %s/%s %q after %v",
					i, ra.Phase, ra.Power, ra.Reason, ra.RequeueAfter, d.Phase, d.Power, d.Reason, d.RequeueAfter)
			}
		}
	})
}

// TestTrackerFields checks each remembered field against the reports that
// make it.
func TestTrackerFields(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) (time.Time, time.Duration) {
		return t0.Add(time.Duration(s) * time.Second), time.Duration(s) * time.Second
	}
	cfg := reboot.Config{OffSettle: 2 * time.Second}
	tr := reboot.NewTracker(0, t0)
	pend := t0.Add(-time.Minute) // stamped before the start: known since it
	h := reboot.Host{Name: "n", Version: "1", Online: true, Status: reboot.Status{PendingRebootSince: pend, LastRequestSeen: pend}}
	read := func(s int, st power.State) reboot.Observed {
		now, m := at(s)
		return tr.Observe(reboot.Reading{Host: h, Power: st, Now: now, Mono: m}, cfg)
	}
	o := read(10, power.StateOn)
	// The pending reboot's power-off, a previous process's, counts as
	// sent at the start, and LostLanding later (A5: its answer may have
	// been lost).
	if !o.Changed || o.QuietFor != 10*time.Second || o.SinceOff != 10*time.Second-reboot.LostLandingOf(reboot.DefaultConfig()) || o.SincePending != 10*time.Second {
		t.Fatalf("first pass: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, 11*time.Second)
	c := tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard, Class: power.ClassBusy}, power.ErrBusy, 11*time.Second)
	if c.Repeats != 0 {
		t.Fatalf("first call repeats %d", c.Repeats)
	}
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, 12*time.Second)
	if c := tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard}, nil, 12*time.Second); c.Repeats != 1 {
		t.Fatalf("second call repeats %d", c.Repeats)
	}
	o = read(13, power.StateUnknown)
	// The busy hard power-off (returned at 11 s) may land until
	// LostLanding (default SoftTimeout) after its return (A5).
	if o.Changed || o.SinceOff != 2*time.Second-reboot.LostLandingOf(reboot.DefaultConfig()) || o.UnknownFor != 0 || o.LastCall.Repeats != 1 || o.OffFor != 0 {
		t.Fatalf("unknown pass: %+v", o)
	}
	o = read(14, power.StateOff)
	if o.UnknownFor != 0 || o.OffFor != 0 {
		t.Fatalf("first off: %+v", o)
	}
	read(15, power.StateUnknown)
	o = read(17, power.StateOff) // the 14 s reading is 3 s old, at least OffSettle
	if o.OffFor != 3*time.Second {
		t.Fatalf("off run: OffFor %v, want 3s", o.OffFor)
	}
	// A write by this pass makes its values known from the pass.
	nst := h.Status
	nst.LastRequestSeen = t0.Add(17 * time.Second)
	tr.Applied(reboot.Decision{UpdateStatus: true, Status: nst}, "2")
	h.Version, h.Status = "2", nst
	o = read(20, power.StateOn)
	if o.Changed || o.SinceRequest != 3*time.Second || o.SincePending != 20*time.Second || o.OffFor != 0 {
		t.Fatalf("after write: %+v", o)
	}
	tr.Sending(reboot.ActionPowerOn, power.ModeHard, 21*time.Second)
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOn}, nil, 21*time.Second)
	h.Version = "3" // someone else wrote
	if o = read(25, power.StateOn); !o.Changed || o.QuietFor != 4*time.Second || o.LastCall.Repeats != 0 {
		t.Fatalf("after power-on: %+v", o)
	}
	// A value stamped after the start, read first, counts from its read.
	late := reboot.NewTracker(0, t0)
	h.Status.PendingRebootSince = t0.Add(5 * time.Second)
	now, m := at(30)
	// (Its power-off, a previous process's, counts from the start +
	// LostLanding, A5.)
	if o := late.Observe(reboot.Reading{Host: h, Now: now, Mono: m}, cfg); o.SincePending != 0 || o.SinceOff != 30*time.Second-reboot.LostLandingOf(reboot.DefaultConfig()) {
		t.Fatalf("late value: %+v", o)
	}
	// Forget: as a restart.
	tr.Forget(40*time.Second, t0.Add(40*time.Second))
	if o = read(41, power.StateOn); !o.Changed || o.QuietFor != time.Second || o.SincePending != 0 || o.LastCall != (reboot.Call{}) {
		t.Fatalf("after Forget: %+v", o)
	}
}

func ExampleTracker() {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true,
		Annotations: map[string]string{reboot.Annotation: ""}})
	cfg := reboot.Config{StaleReads: 2 * time.Second}
	tr := reboot.NewTracker(clk.Monotonic(), clk.Now()) // one per host
	for i := 0; i < 8; i++ {
		d, err := trackerPass(ctx, tr, cfg, hosts, pw, clk.Now, clk.Monotonic, "db-1")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Phase, d.Power)
		clk.Advance(d.RequeueAfter)
	}
	// Output:
	// powering-off power-off
	// powering-off none
	// powering-off none
	// powering-on power-on
	// idle none
	// idle none
	// idle none
	// idle none
}

// TestTrackerPressFields checks SincePress, PressOver and PressOverFor
// and the undoing of a power-off refused before it reached the hardware.
func TestTrackerPressFields(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	cfg := reboot.Config{StaleReads: 5 * time.Second}
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s, end float64, st power.State) reboot.Observed {
		return tr.Observe(reboot.Reading{Host: h, Power: st, Now: t0.Add(sec(s)), Mono: sec(s), ReadEnd: sec(end),
			SoftToggles: true}, cfg)
	}
	o := read(10, 10, power.StateOn)
	if o.SinceOff != math.MaxInt64 || o.SincePress != math.MaxInt64 || o.PressOver {
		t.Fatalf("first pass, nothing under way: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	// A press refused before the hardware (a back-off) is undone.
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, sec(10))
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: reboot.CallClass(power.ErrBackoff)}, power.ErrBackoff, sec(10))
	if o = read(11, 11, power.StateOn); o.SinceOff != math.MaxInt64 || o.SincePress != math.MaxInt64 {
		t.Fatalf("after a refused press: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	// A hard power-off that does not toggle is no press.
	tr.Sending(reboot.ActionPowerOff, power.ModeHard, sec(12))
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeHard}, nil, sec(12))
	if o = read(13, 13, power.StateOn); o.SinceOff != sec(1) || o.SincePress != math.MaxInt64 {
		t.Fatalf("after a hard power-off: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, sec(14))
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft}, nil, sec(15))
	// Off, but read less than StaleReads after the press returned. The
	// press counts from its return (15 s), not from the call's start: it
	// may have reached the BMC at any time up to its return (review 36
	// round 8, TestReview36h_PressCountsFromCallStartNotItsLanding).
	if o = read(19, 19, power.StateOff); o.SincePress != sec(4) || o.SinceOff != sec(4) || o.PressOver {
		t.Fatalf("early Off reading: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	if o = read(20, 20.5, power.StateOff); !o.PressOver || o.PressOverFor != -sec(0.5) {
		t.Fatalf("Off reading StaleReads after the press: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	if o = read(23, 23, power.StateOn); !o.PressOver || o.PressOverFor != sec(2.5) {
		t.Fatalf("later pass: %+v", o)
	}
	// A press that timed out may be carried out later: no reading shows it over.
	tr.Applied(reboot.Decision{}, "")
	tr.Sending(reboot.ActionPowerOff, power.ModeSoft, sec(24))
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOff, Mode: power.ModeSoft, Class: power.ClassBusy}, context.DeadlineExceeded, sec(25))
	// It counts as sent LostLanding (default SoftTimeout) after its
	// return (A5).
	if o = read(40, 40, power.StateOff); o.PressOver || o.SincePress != sec(15)-reboot.LostLandingOf(reboot.DefaultConfig()) {
		t.Fatalf("after a press that timed out: %+v", o)
	}
	// A LastPress read first but stamped after the start was written after
	// it (a previous leader finishing late): its press counts from now,
	// and, not seen answered, LostLanding later (A5).
	ll := reboot.LostLandingOf(reboot.DefaultConfig())
	late := reboot.NewTracker(0, t0)
	lh := reboot.Host{Name: "n", Version: "1", Status: reboot.Status{LastPress: t0.Add(sec(5))}}
	o = late.Observe(reboot.Reading{Host: lh, Power: power.StateOn, Now: t0.Add(sec(10)), Mono: sec(10)}, cfg)
	if o.SincePress != -ll || o.SinceOff != math.MaxInt64 {
		t.Fatalf("late LastPress: SincePress %v SinceOff %v, want -LostLanding and unbounded", o.SincePress, o.SinceOff)
	}
	// One stamped before the start counts from the start (+ LostLanding).
	early := reboot.NewTracker(0, t0.Add(sec(6)))
	o = early.Observe(reboot.Reading{Host: lh, Power: power.StateOn, Now: t0.Add(sec(10)), Mono: sec(10)}, cfg)
	if o.SincePress != sec(10)-ll {
		t.Fatalf("LastPress before the start: SincePress %v, want 10s - LostLanding", o.SincePress)
	}
}

// Review 36 round 2 (TestReview36_StandbyMemoryIgnoresOtherLeadersPress
// for the Tracker): a press or power-off that the status shows after the
// first pass, and that this Tracker did not write (another leader's), is
// counted from the pass that first saw it, never earlier, whatever the
// first pass showed; the Tracker's own writes are not.
func TestTrackerHonoursOtherWritersPress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.Config{}
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s time.Duration, st power.State) reboot.Observed {
		return tr.Observe(reboot.Reading{Host: h, Power: st, Now: t0.Add(s), Mono: s, ReadEnd: s, SoftToggles: true}, cfg)
	}
	if o := read(time.Minute, power.StateOn); o.SinceOff != math.MaxInt64 || o.SincePress != math.MaxInt64 {
		t.Fatalf("first pass, idle: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	// This Tracker writes a pending reboot: its own, no power-off.
	own := h.Status
	own.PendingRebootSince = t0.Add(2 * time.Minute)
	tr.Applied(reboot.Decision{UpdateStatus: true, Status: own}, "2")
	h.Version, h.Status = "2", own
	if o := read(2*time.Minute, power.StateOn); o.SinceOff != math.MaxInt64 || o.SincePress != math.MaxInt64 {
		t.Fatalf("own pending reboot counted as a power-off: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	// Another leader presses (LastPress written by it, 10 s earlier).
	h.Version = "3"
	h.Status.LastPress = t0.Add(3*time.Minute - 10*time.Second)
	// Not seen answered by this Tracker: it may have been lost, so it
	// counts as sent LostLanding after now (A5).
	ll := reboot.LostLandingOf(reboot.DefaultConfig())
	if o := read(3*time.Minute, power.StateOn); o.SinceOff != -ll || o.SincePress != -ll || o.PressOver {
		t.Fatalf("another writer's press not counted from now: %+v", o)
	}
	tr.Applied(reboot.Decision{}, "")
	if o := read(4*time.Minute, power.StateOn); o.SincePress != time.Minute-ll {
		t.Fatalf("the other writer's press dated again: %+v", o)
	}
}

// Review 36 round 3 (TestReview36_AppliedWriteTimeoutTurnsSoftIntoHard for
// the Tracker): the values of a write announced by Writing are the
// Tracker's own even when the write's answer is lost (no Applied): the
// next pass must not take its own LastPress for another leader's press.
func TestTrackerWritingOwnsLostWrite(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.Config{}
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true}
	read := func(s time.Duration) reboot.Observed {
		return tr.Observe(reboot.Reading{Host: h, Power: power.StateOn, Now: t0.Add(s), Mono: s, ReadEnd: s, SoftToggles: true}, cfg)
	}
	read(time.Minute)
	tr.Applied(reboot.Decision{}, "")
	h.Annotations = map[string]string{reboot.Annotation: ""}
	o := read(2 * time.Minute)
	d := cfg.Decide(o, t0.Add(2*time.Minute))
	if !d.UpdateStatus || d.Status.LastPress.IsZero() {
		t.Fatalf("the soft press is not recorded before it is sent: %+v", d)
	}
	tr.Writing(d)
	// The store applied the write; its answer timed out (no Applied).
	h.Version, h.Status = "2", d.Status
	if o = read(2*time.Minute + time.Second); o.SincePress != math.MaxInt64 || o.SinceOff != math.MaxInt64 {
		t.Fatalf("own LastPress of a write whose answer was lost taken for another writer's press: SincePress %v SinceOff %v",
			o.SincePress, o.SinceOff)
	}
	if d = cfg.Decide(o, t0.Add(2*time.Minute+time.Second)); d.Power != reboot.ActionPowerOff || d.Mode != power.ModeSoft {
		t.Fatalf("the soft press is not sent after the lost write: %s %s (%s)", d.Power, d.Mode, d.Reason)
	}
}

// Review 36 round 3 (TestReview36_StandbyIgnoresOtherLeadersPowerOn for
// the Tracker): a LastPoweredOn this Tracker neither wrote nor knew
// (another leader's power-on) restarts QuietFor from the pass that first
// read it; its own does not, and one read in the first pass counts from
// the start unless it was stamped after the start.
func TestTrackerHonoursOtherWritersPowerOn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := reboot.Config{}
	tr := reboot.NewTracker(0, t0)
	h := reboot.Host{Name: "n", Version: "1", Online: true, Status: reboot.Status{LastPoweredOn: t0.Add(-time.Hour)}}
	read := func(s time.Duration, st power.State) reboot.Observed {
		return tr.Observe(reboot.Reading{Host: h, Power: st, Now: t0.Add(s), Mono: s, ReadEnd: s}, cfg)
	}
	if o := read(time.Minute, power.StateOff); o.QuietFor != time.Minute {
		t.Fatalf("first pass: QuietFor %v, want since the start", o.QuietFor)
	}
	tr.Applied(reboot.Decision{}, "")
	// Another leader powers the host on.
	h.Version, h.Status.LastPoweredOn = "2", t0.Add(2*time.Minute)
	if o := read(2*time.Minute+5*time.Second, power.StateOff); o.QuietFor != 0 {
		t.Fatalf("another writer's power-on: QuietFor %v, want 0 (counted from this pass)", o.QuietFor)
	}
	tr.Applied(reboot.Decision{}, "")
	if o := read(3*time.Minute, power.StateOn); o.QuietFor != 55*time.Second {
		t.Fatalf("the other writer's power-on dated again: QuietFor %v, want 55s", o.QuietFor)
	}
	tr.Applied(reboot.Decision{}, "")
	// This Tracker's own power-on: QuietFor from its Sending only.
	own := h.Status
	own.LastPoweredOn = t0.Add(4 * time.Minute)
	d := reboot.Decision{UpdateStatus: true, Status: own, Power: reboot.ActionPowerOn}
	tr.Writing(d)
	tr.Applied(d, "3")
	tr.Sending(reboot.ActionPowerOn, power.ModeSoft, 4*time.Minute)
	tr.Sent(reboot.Call{Action: reboot.ActionPowerOn}, nil, 4*time.Minute)
	h.Version, h.Status = "3", own
	if o := read(5*time.Minute, power.StateOn); o.QuietFor != time.Minute {
		t.Fatalf("own power-on: QuietFor %v, want 1m", o.QuietFor)
	}
	// Read first but stamped after the start: written after it.
	late := reboot.NewTracker(0, t0)
	lh := reboot.Host{Name: "n", Version: "1", Online: true, Status: reboot.Status{LastPoweredOn: t0.Add(5 * time.Second)}}
	if o := late.Observe(reboot.Reading{Host: lh, Power: power.StateOff, Now: t0.Add(10 * time.Second), Mono: 10 * time.Second}, cfg); o.QuietFor != 0 {
		t.Fatalf("late LastPoweredOn: QuietFor %v, want 0", o.QuietFor)
	}
}
