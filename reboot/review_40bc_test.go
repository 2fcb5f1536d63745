package reboot_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40bc_LostOfflinePowerOffLandsAfterOnlineTrueUnknownReadingLetsGoOff
// replays the 40az ground-truth model (forgetRule40az, Online=true check
// on) on the case it found on 0624c73 with a new seed (-rapid.seed=918273645,
// 3,000 checks; fail file under testdata/rapid/ of this test's name, which
// rapid replays first, so the test is deterministic): two processes with
// Guards, a BMC with pLost 0.4 (lost calls landing up to 150 s late),
// pRefuse 0.3, pUnread 0.3, 20% null readings, power button presses
// (button 2). Steps: hand on; restart of the leader; hand on; failover to
// proc 1; the record re-created Online=false at 4m12s (proc 1 sends its
// Online=false power-off, whose answer is lost); Online=true at 4m16s
// (the host still reads On: the enforcement ends, the status is clean);
// dropped from the listing at 4m20s. The lost power-off lands at 5m10s
// (truth: off, by command). Passes then read Off ("the power-on presses
// the power button: wait until no press of ours may land and the reading
// cannot be an echo", busy) or null ("power state unknown: wait"); once
// memory's LostLanding and shutdown windows are over, the leader's pass
// with a null reading reports Busy=false (statusBusy sees a clean
// status, callsMayLand and shutdownMayRun have expired) and the Runner
// forgets the key at 6m32s: the Online=true host, turned off by our own
// power-off, is left off, unwatched, for good.
func TestReview40bc_LostOfflinePowerOffLandsAfterOnlineTrueUnknownReadingLetsGoOff(t *testing.T) {
	forgetRule40az(t, true)
}

// TestReview40bc_LostOfflinePressLandsAfterRecordRecreatedOnlineLetGoOff
// is the same story with one process and no null readings: a BMC whose
// calls press the power button (fake.ButtonAll); Online=false, our
// power-off press times out and lands 60 s later (A5: within LostLanding);
// meanwhile the record is re-created Online=true (status wiped) and the
// host dropped from the inventory. The press lands, the host reads Off
// under Online=true, and the pass waits to power on ("the power-on
// presses the power button: wait until no press of ours may land and the
// reading cannot be an echo", onPressWait) while busy() counts only
// callsMayLand (LostLanding from the call's return): when the two
// windows differ, the pass that still waits reports Busy=false and the
// Runner forgets the key. Ground truth: fake.Power HardwareOn.
func TestReview40bc_LostOfflinePressLandsAfterRecordRecreatedOnlineLetGoOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var mu sync.Mutex
	loseNextOff := false
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, Faults: func(c fake.Call) fake.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.Op == fake.OpOff && loseNextOff {
			loseNextOff = false
			return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 60 * time.Second}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	listed := true
	l := rec.Loop(func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	})
	runLoop40as(t, l, clk, 2*time.Minute)
	if !pw.HardwareOn() {
		t.Fatalf("setup: on; truth %s", rebootcheck.DescribeTruth(pw))
	}
	mu.Lock()
	loseNextOff = true
	mu.Unlock()
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 120 {
			t.Fatalf("setup: no power-off within two minutes of Online=false; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, _ := rec.Reconcile(ctx, "h")
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOff {
			break
		}
	}
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: true} }); err != nil {
		t.Fatal(err)
	}
	listed = false
	held, last := runLoop40as(t, l, clk, 20*time.Minute)
	if !pw.HardwareOn() && !held {
		h, _ := store.Get(ctx, "h")
		t.Fatalf("Online=true host turned off by our lost Online=false press (landed after the record was re-created): let go off, unwatched (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40bc_LostSoftOffLandsAfterOurPowerOnShutsDownLetGoOff: one
// process, no record wipe (found by the 40az model, -rapid.seed=55512321:
// "let go at 3m0s while off under Online=true, powered off by a call of
// ours"). Online=false: our soft power-off times out, its answer lost,
// and the BMC carries it out 140 s later (A5: within LostLanding); the OS
// then takes 28 s to shut down (within SoftTimeout + StaleReads).
// Online=true again at once; the host is dropped from the inventory and
// turned off by hand; our power-on turns it on (memory.onSince = true:
// "no power-on of ours since" is now false, so memory.shutdownMayRun
// no longer counts the lost soft-off). The lost soft-off lands after our
// power-on and its shutdown turns the host off after callsMayLand's
// LostLanding window is nearly over; the BMC's readings are null for a
// minute then (a fault that ends). busy() (busy.go:32) counts the lost
// soft-off only for LostLanding from its return (callsMayLand), not for
// the shutdown it starts when it lands (doc.go's "LostLanding +
// SoftTimeout + StaleReads late"), and onSince hides it from
// shutdownMayRun: a pass reading null reports Busy=false, the Runner
// forgets the key, and the Online=true host stays off, unwatched, for
// good. Ground truth: fake.Power HardwareOn.
func TestReview40bc_LostSoftOffLandsAfterOurPowerOnShutsDownLetGoOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var mu sync.Mutex
	loseNextOff := false
	var nullFrom, nullTo time.Time
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 28 * time.Second, Faults: func(c fake.Call) fake.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.Op == fake.OpOff && loseNextOff {
			loseNextOff = false
			return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 140 * time.Second}
		}
		if c.Op == fake.OpState && !nullFrom.IsZero() && !c.At.Before(nullFrom) && c.At.Before(nullTo) {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	listed := true
	l := rec.Loop(func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	})
	runLoop40as(t, l, clk, 2*time.Minute)
	if !pw.HardwareOn() {
		t.Fatalf("setup: on; truth %s", rebootcheck.DescribeTruth(pw))
	}
	mu.Lock()
	loseNextOff = true
	mu.Unlock()
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	var offAt time.Time
	for i := 0; ; i++ {
		if i > 120 {
			t.Fatalf("setup: no power-off within two minutes of Online=false; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, _ := rec.Reconcile(ctx, "h")
		if res.Decision.Power == reboot.ActionPowerOff {
			offAt = clk.Real()
			clk.Advance(time.Second)
			break
		}
		clk.Advance(time.Second)
	}
	mu.Lock()
	// Null readings from just before the OS finishes shutting down
	// (landing 140 s + 28 s) for a minute.
	nullFrom, nullTo = offAt.Add(165*time.Second), offAt.Add(225*time.Second)
	mu.Unlock()
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	listed = false
	runLoop40as(t, l, clk, 30*time.Second)
	pw.OutOfBandOff()
	held, last := runLoop40as(t, l, clk, 20*time.Minute)
	if !pw.HardwareOn() && !held {
		h, _ := store.Get(ctx, "h")
		t.Fatalf("Online=true host turned off by our lost soft power-off landing after our power-on: let go off, unwatched (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}
