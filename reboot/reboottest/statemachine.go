// Package reboottest is the conformance kit for reboot.HostStore
// implementations: run it from a test of your own store, and your store
// passes the same property test, against the same ground truth, as the
// project's own stores.
//
//	func TestMyStore(t *testing.T) {
//		reboottest.Check(t, func(h reboot.Host) (reboottest.Stores, error) {
//			s := newMyStore(t) // a fresh, empty store
//			if err := s.create(h); err != nil { // h exactly as given
//				return reboottest.Stores{}, err
//			}
//			// a second handle on the same records, as another
//			// process has it (its own client or open of the storage)
//			return reboottest.Stores{Hosts: s, Other: s.reopen()}, nil
//		})
//	}
//
// Check runs Contract (compare-and-swap, ErrNotFound, the new version
// returned, annotations and status written together, no write with an
// ended context (cancelled, or ended by the clock only as a Guard's is
// after a pause: check ctx.Err() just before you write), a HostWatcher
// that never blocks writers) and StateMachine: a reboot.Reconciler over your
// store, fencing clients, a second writer between the Reconciler's read
// and its write, injected conflicts, crashes and restarts, a lying BMC
// (the fake package's adversary modes), a jumping clock, and a clock that
// moves by what a pass asked for (its RequeueAfter) right after it, as a
// Runner moves it, so that calls land and polls come due between passes;
// after every step the answers clients got are checked against the fake
// hardware's ground truth (was it really off after the client's request?
// did a power-off never power it on? did a command, a late landing
// included, power it on while a keyed annotation held it? did one reboot
// cycle the power once?), and at the end, while a second writer keeps
// writing the host, every client must get its answer and every host be
// back on. StateMachineButtons adds BMCs that press the power button,
// StateMachineStuck BMCs stuck on readings that say neither On nor Off
// and Online set false, StateMachineHostile dead BMCs, stuck readings
// flapping with sane ones, and bounds checked over time (a held host off,
// few calls and writes for a held host behind a dead BMC).
//
// A failing case is saved by rapid under testdata/rapid/<TestName>/ of
// your package and replayed on every later run: commit it with the fix.
package reboottest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Stores are the handles of one fresh store under test.
type Stores struct {
	// Hosts is the store the Reconciler uses.
	Hosts reboot.HostStore
	// Other is a second handle on the same records, as another process
	// (a fencing client, an operator, a second controller) has it: its
	// own client, connection or open of the same storage, never Hosts
	// given again (the kit fails when it is the same pointer). Its reads must be current (not from a cache that
	// lags): the kit checks the ground truth through it. Contract's race
	// sends half its writers through each handle, so a HostStore whose
	// version check is atomic with its write only within one process (a
	// sync.Mutex around read, check and write on shared storage) fails.
	// nil fails Contract (and so Check), naming the missing handle: the
	// race would run through Hosts alone and could not catch such a
	// store. The StateMachines use Hosts where Other is nil.
	Other reboot.HostStore
	// Close, if set, is called when the case is done.
	Close func()
}

// NewStores returns a fresh store holding exactly the host h (every field
// as given: the kit sets StaleReads and OffSettle per host in some cases),
// and nothing from an earlier call.
type NewStores func(h reboot.Host) (Stores, error)

// Check runs Contract, StateMachine, StateMachineButtons,
// StateMachineStuck and StateMachineHostile as subtests.
func Check(t *testing.T, newStores NewStores) {
	t.Run("Contract", func(t *testing.T) { Contract(t, newStores) })
	t.Run("StateMachine", func(t *testing.T) { StateMachine(t, newStores) })
	t.Run("StateMachineButtons", func(t *testing.T) { StateMachineButtons(t, newStores) })
	t.Run("StateMachineStuck", func(t *testing.T) { StateMachineStuck(t, newStores) })
	t.Run("StateMachineHostile", func(t *testing.T) { StateMachineHostile(t, newStores) })
}

// hooked is the Reconciler's handle: it runs before (a second writer) just
// before a write, and fails writes with ErrConflict when told to.
type hooked struct {
	reboot.HostStore
	before    func()
	conflicts int
	// writes counts the writes tried that change the status other than
	// by moving RewriteSeen or LastRewriteSeen (a second writer that
	// never stops moves those every pass by design: rewrite.go).
	writes int
}

func (s *hooked) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	if old, err := s.HostStore.Get(ctx, h.Name); err == nil {
		a, b := old.Status, h.Status
		a.RewriteSeen, a.LastRewriteSeen, b.RewriteSeen, b.LastRewriteSeen = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !a.Equal(b) {
			s.writes++
		}
	}
	if f := s.before; f != nil {
		f()
	}
	if s.conflicts > 0 {
		s.conflicts--
		return reboot.Host{}, fmt.Errorf("reboottest: injected: %w", reboot.ErrConflict)
	}
	return s.HostStore.Update(ctx, h)
}

// mutate changes a host as a client does: read, change, compare-and-swap,
// again on a conflict.
func mutate(ctx context.Context, s reboot.HostStore, name string, f func(h *reboot.Host)) error {
	for i := 0; i < 20; i++ {
		h, err := s.Get(ctx, name)
		if err != nil {
			return err
		}
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		f(&h)
		if _, err = s.Update(ctx, h); !errors.Is(err, reboot.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("reboottest: write %s: %w (20 times)", name, reboot.ErrConflict)
}

// StateMachine is the property test of reboot.Reconciler over the store
// (the reboot package's TestRebootStateMachine runs it on the fake store):
// the second writer and injected conflicts go through the store's own
// Update. See the package doc for what it checks; it also checks, against
// the hardware's ground truth, that no power-off ever powers a host on,
// unless the host was powered on or off out of band within the stale
// bound before the call (its On reading may echo a state from before
// that: assumption A2's limit), and, over time against that ground truth
// (so also for calls the fake BMC carries out late, fake.Fault.Late), that
// no command powers the hardware on while a keyed annotation holds the
// host but a power-on call (sent with none in the store, or landing late
// within LostLanding, A5) or one following an out-of-band change within
// LostLanding plus the stale bound.
//
// Its worlds stay inside the assumptions of reboot's doc.go: a restart (a
// drawn one, or one after a crash) whose first pass would run with the
// wall clock further ahead than the clock that wrote the stored
// Status.ActingSince (A3: such a restart dates the calls it bounds early,
// unhandled) is not made, and the process that ran before it goes on.
func StateMachine(t *testing.T, newStores NewStores) {
	rapidcheck.Check(t, stateMachine(newStores, levelBase))
}

// StateMachineButtons is StateMachine in worlds that also draw BMCs whose
// power-off (soft, or every call) is a press of the power button
// (fake.ButtonKind: a press toggles the hardware, after the OS's shutdown
// delay), and a second writer that writes the host every few steps through
// the store and never stops, also in the liveness phase: every request must
// still be answered (issue 36; the reboot package's
// TestRebootStateMachineButtons runs it on the fake store). On a BMC whose
// power-on is a press too (fake.ButtonAll), a power-on call excuses a
// power-on of a held host only if the hardware stayed off since the call
// (a press landing late on a host powered off meanwhile is not excused).
// It is apart from
// StateMachine so that StateMachine's saved failure files replay as they
// were drawn.
func StateMachineButtons(t *testing.T, newStores NewStores) {
	rapidcheck.Check(t, stateMachine(newStores, levelButtons))
}

// StateMachineStuck is StateMachineButtons in worlds that also set the
// host's Online to false and back (the Online=false enforcement), and
// draw a BMC stuck on readings that say neither On nor Off (Transitioning
// or null, while the host runs or while it is off: fake's reports last
// at most their MaxLag, these for as long as the draw says), kept on for
// a drawn part of the liveness phase too. Checked against the hardware's
// ground truth: a power-on is never sent while Online is false (nor in a
// pass whose reading is unknown), the hardware is never powered on by a
// command while Online is false or a keyed annotation holds the host (as
// StateMachine checks for keyed annotations), and once the readings are
// sane again every request is answered and the host is back on. It is
// apart from StateMachineButtons so that the saved failure files of both
// replay as they were drawn.
func StateMachineStuck(t *testing.T, newStores NewStores) {
	rapidcheck.Check(t, stateMachine(newStores, levelStuck))
}

// StateMachineHostile is StateMachineStuck in harsher worlds (review 36
// round 24): a BMC that goes dead (every call times out, not carried out)
// for drawn spells, kept dead for a drawn part of the liveness phase; stuck
// readings that flap with sane ones (stuck 40 s of every minute); Online
// kept false through the stuck or dead part of the liveness phase in some
// cases. It also checks over time, in every phase, that a held host does
// not stay on (ground truth) longer than the bound a stuck BMC allows once
// its BMC takes calls (longer by the retry each power call that failed by
// a fault queued earlier costs), and that a held host that is off, its BMC dead
// during the liveness phase, gets few power calls and Status writes (the
// run's calls back off). It is apart from StateMachineStuck so that the
// saved failure files of both replay as they were drawn.
func StateMachineHostile(t *testing.T, newStores NewStores) {
	rapidcheck.Check(t, stateMachine(newStores, levelHostile))
}

// The levels of stateMachine's draws: each adds to the one before.
const (
	levelBase = iota
	levelButtons
	levelStuck
	levelHostile
)

// Stuck readings (StateMachineStuck): what a BMC reads instead of On or
// Off.
const (
	stuckNone = iota
	stuckTransitioningOn
	stuckNullOn
	stuckTransitioningOff
	stuckNullOff
	stuckModes
)

// stuckPower is a fake BMC whose readings may be stuck (mode): On (or Off)
// reads Transitioning or null. Every other method is the fake's.
type stuckPower struct {
	*fake.Power
	mode int
	// flap, if set, keeps the readings stuck only for the first 40 s of
	// every minute of real time (real), sane otherwise.
	flap bool
	real func() time.Time
}

// State implements power.Controller.
func (s *stuckPower) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err != nil {
		return st, err
	}
	if s.flap && s.real().Unix()%60 >= 40 {
		return st, nil
	}
	switch {
	case st == power.StateOn && s.mode == stuckTransitioningOn, st == power.StateOff && s.mode == stuckTransitioningOff:
		return power.StateTransitioning, nil
	case st == power.StateOn && s.mode == stuckNullOn, st == power.StateOff && s.mode == stuckNullOff:
		return power.StateUnknown, nil
	}
	return st, nil
}

// stateMachine is StateMachine's property; level adds
// StateMachineButtons' draws, then StateMachineStuck's.
func stateMachine(newStores NewStores, level int) func(*rapid.T) {
	ext := level >= levelButtons
	return func(t *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := fake.DrawPowerConfig(t, "power")
		syncEvery := 0 // steps between a second writer's writes; 0: none
		if ext {
			cfg.Button = fake.ButtonKind(rapid.IntRange(0, 2).Draw(t, "button"))
			if cfg.Button == fake.ButtonAll {
				cfg.IgnoreSoft = false // nothing could ever power it off
			}
			syncEvery = rapid.IntRange(1, 4).Draw(t, "syncEvery")
		}
		// dead: every call times out and is not carried out (a BMC
		// whose network is down, a host unplugged at the PDU).
		var dead bool
		var deadEnded time.Time // real time the last dead spell ended
		if level >= levelHostile {
			inner := cfg.Faults
			cfg.Faults = func(c fake.Call) fake.Fault {
				if dead {
					return fake.Fault{Kind: fake.FaultTimeout}
				}
				if inner != nil {
					return inner(c)
				}
				return fake.Fault{}
			}
		}
		pw := fake.NewPower(clk.Real, cfg)
		faults := newFaultQueue(pw)
		// The controller's bounds: the default, or exactly the BMC's own
		// (the tightest the assumptions allow), per host or for all.
		rcfg := reboot.Config{}
		var hostStale, hostSettle time.Duration
		if rapid.Bool().Draw(t, "tight") {
			// A reading is as old as the report's staleness plus the
			// fake's Lag: the truth dates a power call at its start, the
			// report shows it Lag later (A1's bound for this BMC).
			stale := max(cfg.Report.Stale+cfg.Lag, time.Millisecond)
			if rapid.Bool().Draw(t, "perHost") {
				hostStale, hostSettle = stale, cfg.Report.EarlyOff
			} else {
				rcfg.StaleReads, rcfg.OffSettle = stale, cfg.Report.EarlyOff
			}
		} else {
			rcfg.OffSettle = fake.MaxEarlyOff
		}
		stores, err := newStores(reboot.Host{Name: "h", Online: true, StaleReads: hostStale, OffSettle: hostSettle})
		if err != nil {
			t.Fatalf("new store: %v", err)
		}
		if stores.Close != nil {
			defer stores.Close()
		}
		other := stores.Other
		if other == nil {
			other = stores.Hosts
		}
		store := &hooked{HostStore: stores.Hosts}
		syncs := 0
		sync := func() {
			syncs++
			if err := mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations["inventory.example.com/synced"] = strconv.Itoa(syncs) }); err != nil {
				t.Fatal(err)
			}
		}
		stuck := &stuckPower{Power: pw, real: clk.Real}
		var ctl *rebootcheck.Probe
		if level >= levelStuck {
			ctl = &rebootcheck.Probe{Controller: stuck}
		} else {
			ctl = &rebootcheck.Probe{Controller: pw}
		}
		offlines := 0 // Online set false: each may add a power cycle by command
		newReconciler := func() *reboot.Reconciler {
			return &reboot.Reconciler{
				Hosts:     store,
				Power:     func(string) (power.Controller, error) { return ctl, nil },
				Now:       clk.Now,
				Monotonic: clk.Monotonic,
				Config:    rcfg,
			}
		}
		r := newReconciler()
		// Restarts stay inside assumption A3 (reboot/doc.go): a restart
		// whose wall clock runs ahead of the one that wrote the stored
		// Status.ActingSince dates the calls it bounds that much early,
		// and is documented unhandled (a press whose answer was lost
		// counted landed too soon). A restart (drawn, or after a crash)
		// takes its start on the wall clock at its first pass; if the
		// clock then runs ahead of the skew the stored ActingSince was
		// written with, the restart is not made: the process that ran
		// before it goes on (a crash's power call then failed, never
		// reaching the hardware). actingSkew holds the skew each
		// ActingSince value was written with: the writer's start skew
		// (its ActingSince is its start plus monotonic time), or for a
		// value it took from the status (Observed.ActingSince gives the
		// status's own back), the first writer's.
		restarts := newRestarts(clk)
		keys := []string{"fencing", "drain", "storage"}
		clients := map[string]*reboot.Client{}
		for _, k := range keys {
			clients[k] = &reboot.Client{Hosts: other, Key: k, Now: clk.Now}
		}
		open := map[string]rebootcheck.Ticket{} // tickets whose annotation is present
		// A raw client (the seed's remediation) writes the same value every
		// time and asks Status.Fenced(T) itself.
		const rawKey, rawValue = reboot.AnnotationPrefix + "raw", `{"mode":"hard"}`
		var raw *rebootcheck.Ticket
		var bareAt time.Time // real time the bare annotation was written
		episodes := 0
		lostOffs := 0 // power-off faults queued whose answer is lost (A5)
		// lateCalls counts the lost calls the fake BMC carries out late
		// (fake.Fault.Late, A5): one that lands after the power-on the
		// controller decided once the host read off makes one more power
		// cycle than the reboots decided, which no controller can stop
		// (the call is out of its hands): each may add one.
		lateCalls := 0
		// The reboots decided are counted by Status.Works, the count each
		// work takes when it begins: two reboots can have the same
		// PendingRebootSince (a clock corrected between them), and a
		// repair moves one reboot's PendingRebootSince.
		var lastWorks uint64
		// asked counts the reboot requests the kit wrote (a client's
		// request, a bare annotation, the raw client's): each starts one
		// reboot at most, so the cycles are bounded by it too, ground
		// truth that does not take the controller's own Status.Works on
		// trust. A request joins a reboot pending by ground truth (the
		// hardware has not been off and back on since the last one
		// counted) and is not counted: the bound is as tight as the
		// hardware allows. One made while the hardware is off counts if
		// it went off and back on since the last one counted (that
		// one's cycle is over, whatever came after: an out-of-band
		// power-off at the same instant, seed 202). The changes are
		// taken by their place in the ground truth, not their time, so
		// that changes at the request's own instant are not mistaken
		// for earlier ones.
		asked := 0
		askedTruth, askedOn := 0, false // len(pw.Truth()) and the power at the last one counted
		ask := func() {
			tr := pw.Truth()
			if asked == 0 || rebootcheck.CycledSince(tr[askedTruth:], askedOn) {
				asked++
				askedTruth, askedOn = len(tr), pw.HardwareOn()
			}
		}
		var backJumps time.Duration
		var lastWall time.Time = clk.Now()

		host := func() reboot.Host {
			h, err := other.Get(ctx, "h")
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		ctl.OnOn = func() {
			if ctl.LastRead == power.StateUnknown {
				t.Fatalf("power-on sent in a pass whose power read was unknown")
			}
			h := host()
			if k := rebootcheck.HeldBy(h); k != "" {
				t.Fatalf("power-on sent while %s is in the store", k)
			}
			if !h.Online {
				t.Fatalf("power-on sent while Online is false")
			}
		}
		// No power-off may power a host on (a press of the power button
		// on a host that is off), but on an On reading that echoes an
		// out-of-band change made within the stale bound before it.
		staleBound := reboot.DefaultConfig().StaleReads
		if rcfg.StaleReads > 0 {
			staleBound = rcfg.StaleReads
		}
		if hostStale > 0 {
			staleBound = hostStale
		}
		// How long a held host may stay on while the readings are
		// stuck: a press that may still land (A5), a soft power-off's
		// SoftTimeout and the long run of unsure readings, each with
		// StaleReads, a reissue, and a minute of slack; and for each
		// power call that failed by a fault queued earlier (action 8)
		// the retry it costs (faultQueue.extra).
		dc := reboot.DefaultConfig()
		heldOffBound := reboot.LostLandingOf(rcfg) + 2*(dc.SoftTimeout+staleBound) + dc.ReissueAfter + time.Minute
		heldOffFrom := func(from time.Time) time.Duration { return heldOffBound + faults.extra(from, staleBound) }
		var wasOn bool
		ctl.OnOff = func(power.Mode) { wasOn = pw.HardwareOn() }
		ctl.AfterOff = func(m power.Mode) {
			if wasOn || !pw.HardwareOn() {
				return
			}
			for _, ev := range pw.OutOfBandEvents() {
				if !ev.At.Before(clk.Real().Add(-staleBound)) {
					return
				}
			}
			t.Fatalf("a %s power-off pressed the power button of a host that was off and powered it on; truth %s", m, rebootcheck.DescribeTruth(pw))
		}
		// The interloper: a second writer armed by an action, firing just
		// before the Reconciler's next write.
		var interlope func()
		store.before = func() {
			if f := interlope; f != nil {
				interlope = nil
				f()
			}
		}

		request := func(key string, mode power.Mode) {
			tk, err := clients[key].Request(ctx, "h", mode)
			if err != nil {
				t.Fatalf("request %s: %v", key, err)
			}
			open[key] = rebootcheck.Ticket{Ticket: tk, Real: clk.Real()}
			ask()
		}
		rawRequest := func() {
			at := clk.Now()
			if err := mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations[rawKey] = rawValue }); err != nil {
				t.Fatal(err)
			}
			raw = &rebootcheck.Ticket{Ticket: reboot.Ticket{Host: "h", Annotation: rawKey, Value: rawValue, At: at}, Real: clk.Real()}
			ask()
		}
		rawRelease := func() {
			if err := mutate(ctx, other, "h", func(h *reboot.Host) { delete(h.Annotations, rawKey) }); err != nil {
				t.Fatal(err)
			}
			raw = nil
		}
		release := func(key string) {
			if err := clients[key].Release(ctx, open[key].Ticket); err != nil {
				t.Fatalf("release %s: %v", key, err)
			}
			delete(open, key)
		}

		reconcile := func() reboot.Result {
			before := host()
			r = restarts.firstPass(r, before.Status.ActingSince)
			// A pass takes no time at all: its reading, its power call and a
			// client's T after it can share one clock reading (coarse clocks
			// do that), and a tie must never fence.
			res, err := r.Reconcile(ctx, "h")
			if err != nil && !errors.Is(err, reboot.ErrConflict) {
				t.Fatalf("reconcile: %v", err)
			}
			if ctl.Crashed {
				ctl.Crashed = false
				r = restarts.restart(r, newReconciler())
			}
			after := host()
			restarts.written(after.Status.ActingSince)
			if _, had := before.Annotations[reboot.Annotation]; had {
				if _, has := after.Annotations[reboot.Annotation]; !has {
					if !pw.WasOffDuring(bareAt, clk.Real()) {
						t.Fatalf("bare annotation (written at %v) removed, but the hardware has not been off since", bareAt)
					}
				}
			}
			if after.Status.Pending() && after.Status.Works != lastWorks {
				episodes++
				lastWorks = after.Status.Works
			}
			return res
		}

		// Never on while a keyed annotation holds the host, checked over
		// time against the hardware's ground truth (late landings of lost
		// calls included, fake.Fault.Late): every power-on of the
		// hardware by a command after the first check that saw the host
		// held, while it stays held, must be a power-on call's (OnOn
		// checks those were sent with no keyed annotation in the store;
		// one whose answer was lost may land up to LostLanding after it,
		// A5), or follow an out-of-band change within LostLanding plus the
		// stale bound (an On reading that echoes it, A2's limit); never a
		// press landing on a held host that is off. On a BMC whose
		// power-on is a press (fake.ButtonAll), a power-on call's landing
		// is its own only on a host that stayed off since the call: one
		// the hardware went on and off again meanwhile (a power-off the
		// controller sent while the call's press could still land) is a
		// press landing on a host powered off since
		// (TestReview36p_RestartForgetsLostPowerOnPress).
		var heldSince time.Time // zero while no keyed annotation holds the host
		truthSeen := 0
		landing := reboot.LostLandingOf(rcfg)
		onPresses := cfg.Button == fake.ButtonAll
		checkHeldOn := func(h reboot.Host) {
			truth := pw.Truth()
			for i, tc := range truth[truthSeen:] {
				if !tc.On || tc.Cause != fake.CauseCommand || heldSince.IsZero() || !tc.At.After(heldSince) {
					continue
				}
				explained := false
				for _, c := range pw.Calls() {
					if c.Op == fake.OpOn && !c.At.After(tc.At) && !c.At.Before(tc.At.Add(-landing-time.Second)) &&
						(!onPresses || !changedBetween(truth[:truthSeen+i], c.At)) {
						explained = true
					}
				}
				for _, ev := range pw.OutOfBandEvents() {
					if !ev.At.After(tc.At) && !ev.At.Before(tc.At.Add(-landing-staleBound-time.Second)) {
						explained = true
					}
				}
				if !explained {
					t.Fatalf("the hardware was powered on at %v (not by a power-on call) while a keyed annotation held the host (since %v at the latest): a press landed on the held host while it was off; truth %s",
						tc.At, heldSince, rebootcheck.DescribeTruth(pw))
				}
			}
			truthSeen = len(truth)
			switch held := rebootcheck.HeldBy(h) != "" || !h.Online; {
			case !held:
				heldSince = time.Time{}
			case heldSince.IsZero():
				heldSince = clk.Real()
			}
		}

		// A held host does not stay on (ground truth), whatever the
		// readings say, longer than heldOffBound from when it was held,
		// went on, or its BMC last came back to life (StateMachineHostile;
		// a BMC whose power-off may press the button for every mode,
		// ButtonAll, is never sent one on unsure readings).
		checkHeldOff := func(h reboot.Host) {
			if level < levelHostile || dead || cfg.Button == fake.ButtonAll || heldSince.IsZero() || !pw.HardwareOn() {
				return
			}
			from := heldSince
			if truth := pw.Truth(); len(truth) > 0 && truth[len(truth)-1].At.After(from) {
				from = truth[len(truth)-1].At
			}
			if deadEnded.After(from) {
				from = deadEnded
			}
			if bound := heldOffFrom(from); clk.Real().Sub(from) >= bound {
				t.Fatalf("a host held since %v is on by ground truth at %v, since %v, past the bound %v (the BMC stuck reading %d, flapping %v); status %+v; truth %s",
					heldSince, clk.Real(), from, bound, stuck.mode, stuck.flap, h.Status, rebootcheck.DescribeTruth(pw))
			}
		}

		check := func() {
			h := host()
			checkHeldOn(h)
			checkHeldOff(h)
			now := clk.Now()
			if now.Before(lastWall) {
				backJumps += lastWall.Sub(now)
			}
			lastWall = now
			for _, k := range keys {
				_, inStore := h.Annotations[reboot.AnnotationPrefix+k]
				_, inModel := open[k]
				if inStore != inModel {
					t.Fatalf("annotation %s: in store %v, its client thinks %v", k, inStore, inModel)
				}
			}
			if _, inStore := h.Annotations[rawKey]; inStore != (raw != nil) {
				t.Fatalf("raw annotation: in store %v, its client thinks %v", inStore, raw != nil)
			}
			if raw != nil && h.Status.Fenced(raw.At, now) && !pw.WasOffDuring(raw.Real.Add(-backJumps), clk.Real()) {
				t.Fatalf("raw client told fenced for T=%v (real %v), but the hardware has run since; status %+v, truth %v",
					raw.At, raw.Real, h.Status, rebootcheck.DescribeTruth(pw))
			}
			for k, tk := range open {
				if !reboot.FencedFor(h.Status, tk.Ticket, now) {
					continue
				}
				if !pw.WasOffDuring(tk.Real.Add(-backJumps), clk.Real()) {
					t.Fatalf("client %s told fenced for T=%v (real %v), but the hardware has run since; status %+v, truth %v",
						k, tk.At, tk.Real, h.Status, rebootcheck.DescribeTruth(pw))
				}
			}
			if err := rebootcheck.CheckCycles(pw, min(episodes, asked)+lateCalls+offlines); err != nil {
				t.Fatalf("%v; truth %s; status %+v", err, rebootcheck.DescribeTruth(pw), h.Status)
			}
		}

		setOnline := func(on bool) {
			if err := mutate(ctx, other, "h", func(h *reboot.Host) {
				if h.Online && !on {
					offlines++
				}
				h.Online = on
			}); err != nil {
				t.Fatal(err)
			}
		}
		steps := rapid.IntRange(20, 150).Draw(t, "steps")
		actions := 15
		if level >= levelStuck {
			actions = 17
		}
		if level >= levelHostile {
			actions = 19
		}
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, actions).Draw(t, "action") {
			case 0, 1:
				reconcile()
			case 2, 3:
				// A pass, then the wait it asked for (capped): the clock
				// moves as a Runner moves it, so that what a pass
				// schedules (a poll, a reissue, a landing wait) comes due
				// inside the case, with BMC calls landing meanwhile. The
				// oracle looks at the pass's instant first. A draw of its
				// own (a bool after every pass) would shift the bits of the
				// committed failure files: these two actions were plain
				// passes before.
				res := reconcile()
				check()
				clk.Advance(min(max(res.RequeueAfter, time.Millisecond), 4*time.Minute))
			case 4:
				k := rapid.SampledFrom(keys).Draw(t, "key")
				request(k, power.Mode(rapid.IntRange(0, 1).Draw(t, "mode")))
			case 5:
				k := rapid.SampledFrom(keys).Draw(t, "key")
				if _, ok := open[k]; ok {
					release(k)
				}
			case 6:
				v := rapid.SampledFrom([]string{"", `{"mode":"hard"}`, `{"mode":"soft"}`, "not json"}).Draw(t, "value")
				if err := mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations[reboot.Annotation] = v }); err != nil {
					t.Fatal(err)
				}
				ask()
				if bareAt.IsZero() || !host().Status.Pending() {
					bareAt = clk.Real()
				}
			case 7:
				clk.Apply(fake.DrawClockMove(t, "clock", true))
			case 8:
				op := rapid.SampledFrom([]fake.Op{fake.OpState, fake.OpOn, fake.OpOff}).Draw(t, "faultOp")
				k := rapid.SampledFrom([]fake.FaultKind{fake.FaultBusy, fake.FaultFailed, fake.FaultTimeout, fake.FaultUnsupported}).Draw(t, "fault")
				f := fake.Fault{Kind: k, Applied: rapid.Bool().Draw(t, "applied")}
				if f.Applied && k == fake.FaultTimeout && op != fake.OpState {
					// A lost answer: the BMC may carry the call out up to
					// LostLanding after it (A5).
					f.Late = time.Duration(rapid.IntRange(0, int(reboot.LostLandingOf(rcfg)/time.Second)).Draw(t, "late")) * time.Second
					if f.Late > 0 {
						lateCalls++
					}
				}
				faults.failNext(op, f)
				if op == fake.OpOff && k == fake.FaultTimeout {
					lostOffs++ // may still be queued in the liveness phase
				}
			case 9:
				r = restarts.restart(r, newReconciler()) // a restart between two steps
			case 10:
				ctl.CrashArmed = true // a crash after persisting, before the power call
			case 11:
				store.conflicts++
			case 12:
				// A second writer between the Reconciler's read and write: a
				// client requesting or releasing, or an unrelated annotation
				// (kubectl), or an invalid reboot key.
				k := rapid.SampledFrom(keys).Draw(t, "interloperKey")
				what := rapid.IntRange(0, 3).Draw(t, "interloper")
				atRead := rapid.Bool().Draw(t, "interloperAtRead")
				f := func() {
					switch _, held := open[k]; {
					case what == 0 && !held:
						request(k, power.ModeHard)
					case what == 1 && held:
						release(k)
					case what == 2:
						_ = mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations["example.com/touch"] = clk.Now().String() })
					default:
						_ = mutate(ctx, other, "h", func(h *reboot.Host) { h.Annotations[reboot.AnnotationPrefix] = `{"mode":"hard"}` })
					}
				}
				if atRead {
					ctl.OnRead = f // after the Reconciler read the host, before it decides
				} else {
					interlope = f // just before its write
				}
			case 13:
				// A cooperative client: release once fenced.
				for _, k := range keys {
					if tk, ok := open[k]; ok {
						if f, err := clients[k].Fenced(ctx, tk.Ticket); err == nil && f {
							release(k)
							break
						}
					}
				}
			case 14:
				if rapid.IntRange(0, 3).Draw(t, "oob") == 0 {
					pw.OutOfBandOff()
				} else {
					pw.OutOfBandOn()
				}
			case 15:
				// The raw client: request, release, or (when told fenced)
				// release and request again with the same value before the
				// controller's next pass.
				switch {
				case raw == nil:
					rawRequest()
				case rapid.Bool().Draw(t, "rawAgain"):
					rawRelease()
					rawRequest()
				default:
					rawRelease()
				}
			case 16:
				setOnline(!host().Online)
			case 17:
				stuck.mode = rapid.IntRange(stuckNone, stuckModes-1).Draw(t, "stuck")
			case 18:
				if dead {
					deadEnded = clk.Real()
				}
				dead = !dead
			case 19:
				stuck.flap = !stuck.flap
			}
			if syncEvery > 0 && i%syncEvery == 0 {
				sync()
			}
			check()
		}

		// Liveness: the world behaves from here on, but for the second
		// writer, which never stops.
		interlope, ctl.OnRead = nil, nil
		store.before = nil
		ctl.CrashArmed = false
		pw.SetReport(fake.Report{})
		// Online back to true; a stuck BMC stays stuck for a drawn part
		// of the liveness phase (the checks above run all along), then
		// its readings are sane.
		stuckFor := 0
		if level >= levelStuck {
			setOnline(true)
			if stuck.mode != stuckNone {
				stuckFor = rapid.IntRange(0, 240).Draw(t, "stuckFor")
			}
		}
		// StateMachineHostile: a dead BMC stays dead for a drawn part of
		// the liveness phase; Online may stay false until the BMC is
		// sane (stuck and dead spells over).
		deadFor, offlineFor, oobAt := 0, 0, -1
		var oobReal time.Time
		holdFor := 0 // liveness steps a fenced client keeps its hold
		if level >= levelHostile {
			if stuck.mode != stuckNone {
				// rapid favours small draws: here a long stuck spell
				// is the common case, and someone else may power the
				// host on during it (a held host then stays on only
				// as long as checkHeldOff allows).
				stuckFor = max(stuckFor, 240-rapid.IntRange(0, 240).Draw(t, "stuckShort"))
				if rapid.Bool().Draw(t, "oobOn") {
					oobAt = rapid.IntRange(0, stuckFor).Draw(t, "oobAt")
				}
			}
			if dead {
				// rapid favours small draws: a long spell (up to 20
				// minutes) is the common case.
				deadFor = 240 - rapid.IntRange(0, 240).Draw(t, "deadShort")
			}
			if rapid.Bool().Draw(t, "keepOffline") {
				offlineFor = max(stuckFor, deadFor, 1)
				setOnline(false)
			}
			// A fencing client may keep its fenced host held for a
			// while (the host then stays off, checkHeldOff).
			holdFor = rapid.IntRange(0, max(stuckFor, deadFor)).Draw(t, "holdFor")
		}
		// A held host that is off, its BMC dead: the power calls and
		// Status writes of such a spell (calm) are bounded.
		var calmSince time.Time
		calmCalls, calmWrites := 0, 0
		powerCalls := func() int {
			n := 0
			for _, c := range pw.Calls() {
				if c.Op == fake.OpOn || c.Op == fake.OpOff {
					n++
				}
			}
			return n
		}
		clk.Correct()
		lastWall = clk.Now()
		// A3: evidence stamped while the wall clock ran ahead is dropped
		// by the controller's next pass after the correction (reboot/doc.go
		// says Fenced may vouch for it until then); the world behaves from
		// here on, so that pass runs before anyone asks again (and is not
		// lost to a conflict injected earlier: the second writer below
		// still writes between passes).
		store.conflicts = 0
		reconcile()
		// An invalid key written by the second writer stays: it must never
		// hold the host.
		fencedTickets := map[string]bool{}
		for k := range open {
			fencedTickets[k] = false
		}
		if raw != nil {
			// Its T may have been taken on a clock that has been corrected
			// since: it asks again (the same value, before the next pass).
			rawRelease()
			rawRequest()
		}
		rawFenced := raw == nil
		converged := false
		// 25 minutes, and for each lost power-off still queued, and for
		// the controller's last restart (what it did not see answered),
		// the LostLanding + SoftTimeout + StaleReads that A5 holds a
		// press back (reboot.Config.LostLanding).
		budget := 300 + max(stuckFor, deadFor) + (lostOffs+1)*int((reboot.LostLandingOf(rcfg)+dc.SoftTimeout+staleBound+4*time.Second)/(5*time.Second))
		for i := 0; i < budget && !converged; i++ {
			if i >= stuckFor {
				stuck.mode = stuckNone
			}
			if i == oobAt {
				pw.OutOfBandOn()
				oobReal = clk.Real()
			}
			if dead && i >= deadFor {
				dead, deadEnded = false, clk.Real()
			}
			if offlineFor > 0 && i >= offlineFor {
				offlineFor = 0
				setOnline(true)
			}
			if level >= levelHostile {
				h := host()
				calm := dead && !pw.HardwareOn() && (h.Status.Covers() || !h.Status.Pending() && !h.Status.OfflineOffSeen.IsZero())
				switch {
				case !calm:
					calmSince = time.Time{}
				case calmSince.IsZero():
					calmSince, calmCalls, calmWrites = clk.Real(), powerCalls(), store.writes
				default:
					// The run's calls back off, doubling from SoftTimeout
					// + StaleReads: at most 4 in the 20 minutes a spell
					// lasts at most, 2 writes each and a few more.
					if n, w := powerCalls()-calmCalls, store.writes-calmWrites; n > 4 || w > 12 {
						t.Fatalf("a held host, off, its BMC dead since %v: %d power calls and %d Status writes by %v; status %+v",
							calmSince, n, w, clk.Real(), h.Status)
					}
				}
			}
			// A held host stays off by ground truth while the BMC's
			// readings are stuck: a power-off that sets the power goes
			// out after a long run of them (one that presses, on a
			// ButtonAll BMC, never goes out on them: it could power a
			// held host on), within heldOffBound of the latest of when
			// it was held, its BMC came back to life and someone
			// powered it on (StateMachineHostile's oobAt), plus what
			// the faults queued earlier cost.
			if stuck.mode != stuckNone && cfg.Button != fake.ButtonAll && !heldSince.IsZero() && !dead && pw.HardwareOn() &&
				(level < levelHostile || oobAt < 0 || i > oobAt) {
				from := heldSince
				if deadEnded.After(from) {
					from = deadEnded
				}
				if level >= levelHostile && oobAt >= 0 && oobReal.After(from) {
					from = oobReal
				}
				if bound := heldOffFrom(from); clk.Real().Sub(from) >= bound {
					t.Fatalf("a host held since %v is on by ground truth at %v, past the bound %v from %v, the BMC stuck reading %d (liveness step %d of %d stuck); status %+v; truth %s",
						heldSince, clk.Real(), bound, from, stuck.mode, i, stuckFor, host().Status, rebootcheck.DescribeTruth(pw))
				}
			}
			if raw != nil && host().Status.Fenced(raw.At, clk.Now()) {
				if !pw.WasOffDuring(raw.Real.Add(-backJumps), clk.Real()) {
					t.Fatalf("raw client told fenced for T=%v at the end, but the hardware has run since; truth %v", raw.At, rebootcheck.DescribeTruth(pw))
				}
				rawFenced = true
				rawRelease()
			}
			for _, k := range keys {
				if tk, ok := open[k]; ok {
					f, err := clients[k].Fenced(ctx, tk.Ticket)
					if err != nil {
						t.Fatalf("client %s: %v", k, err)
					}
					if f {
						if !pw.WasOffDuring(tk.Real.Add(-backJumps), clk.Real()) {
							t.Fatalf("client %s told fenced for T=%v at the end, but the hardware has run since; truth %v", k, tk.At, rebootcheck.DescribeTruth(pw))
						}
						fencedTickets[k] = true
						if i >= holdFor {
							release(k)
						}
					}
				}
			}
			sync() // a second writer (an inventory sync) never stops
			reconcile()
			check()
			h := host()
			converged = len(open) == 0 && raw == nil && !h.Status.Pending() && pw.Current() == power.StateOn && !rebootcheck.HasValidReboot(h)
			clk.Advance(5 * time.Second)
		}
		h := host()
		if !converged {
			t.Fatalf("did not converge: annotations %v, status %+v, power %v, open %v", h.Annotations, h.Status, pw.Current(), open)
		}
		if !rawFenced {
			t.Fatalf("the raw client released without ever being told fenced")
		}
		for k, f := range fencedTickets {
			if !f {
				t.Fatalf("client %s released without ever being told fenced", k)
			}
		}
	}
}

// changedBetween reports whether the hardware's power changed, by any
// cause, after at in truth (the changes before the one checked).
func changedBetween(truth []fake.TruthChange, at time.Time) bool {
	for _, tc := range truth {
		if tc.At.After(at) {
			return true
		}
	}
	return false
}
