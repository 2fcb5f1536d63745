package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40ba_OnlineBackDuringSoftOffWallClockStepLetGoOffForGood: the
// round 50 High (TestReview40az_OnlineBackDuringSoftOffLetGoOffForGood)
// with the wall clock stepped forward (an NTP correction) right after the
// owner sets Online=true again. shutdownMayRun (decide_phases.go) bounds
// the OS's shutdown by the wall clock alone (now - OfflineSoftSince), and
// busy's memory (callsMayLand) counts only lost calls, not an answered
// soft power-off: after the step the On reading of the still-shutting-down
// host ends the enforcement, the unlisted key is let go, the OS finishes
// its shutdown, and the Online=true host stays off for good. Ground
// truth: fake.Power (real time).
func TestReview40ba_OnlineBackDuringSoftOffWallClockStepLetGoOffForGood(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
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
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("setup: no power-off within a minute of Online=false; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, err := rec.Reconcile(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOff {
			break
		}
	}
	runLoop40as(t, l, clk, time.Second)
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	clk.Jump(time.Hour) // the wall clock is corrected forward
	listed = false
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.HardwareOn() && !held {
		t.Fatalf("Online=true host powered off by our own soft power-off, wall clock stepped forward 1h, dropped from the inventory: let go while its OS shut down, left off for good (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40ba_ReleasedFenceLetGoThenOnlineTrueFoundAgain: the round 50
// Medium's host (a fence released under Online=false, known off, let go
// as offlineHeldDone) is set Online=true again while unlisted, with and
// without a restart: the HostLister (fake.RebootHosts) must find it again
// and the controller power it on. Ground truth: fake.Power.
func TestReview40ba_ReleasedFenceLetGoThenOnlineTrueFoundAgain(t *testing.T) {
	for _, restart := range []bool{false, true} {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := reboot.DefaultConfig()
		pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second})
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
		mk := func() reboot.Loop {
			rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(string) (power.Controller, error) { return pw, nil }}
			return rec.Loop(func(context.Context) ([]string, error) { return nil, nil })
		}
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
		cl := &reboot.Client{Hosts: store, Key: "fencer", Now: clk.Now}
		tk, err := cl.Request(ctx, "h", power.ModeHard)
		if err != nil {
			t.Fatal(err)
		}
		runLoop40as(t, l, clk, 2*time.Minute)
		if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
			t.Fatal(err)
		}
		runLoop40as(t, l, clk, time.Minute)
		if err := cl.Release(ctx, tk); err != nil {
			t.Fatal(err)
		}
		runLoop40as(t, l, clk, time.Minute)
		listed = false
		held, _ := runLoop40as(t, l, clk, 30*time.Minute)
		if held || pw.HardwareOn() {
			t.Fatalf("setup: let go and off (held %v); truth %s", held, rebootcheck.DescribeTruth(pw))
		}
		if restart {
			l = mk()
		}
		onAt := clk.Real()
		if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
			t.Fatal(err)
		}
		_, last := runLoop40as(t, l, clk, 10*time.Minute)
		h, _ := store.Get(ctx, "h")
		if !pw.HardwareOn() {
			t.Fatalf("restart %v: Online=true again at %v, host unlisted: left off 10 min (last Next %+v; status %+v); truth %s",
				restart, onAt, last, h.Status, rebootcheck.DescribeTruth(pw))
		}
	}
}

// TestReview40ba_ReleasedFenceLetGoThenNewFenceAnswered: after the round
// 50 Medium's let-go (Online=false, a bare reboot pending, known off), a
// second fencer requests the host: the HostLister must find it again and
// the request be answered (Client.Fenced) with the host off throughout.
func TestReview40ba_ReleasedFenceLetGoThenNewFenceAnswered(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second})
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
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: clk.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	if err != nil {
		t.Fatal(err)
	}
	runLoop40as(t, l, clk, 2*time.Minute)
	offFrom := clk.Real()
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	runLoop40as(t, l, clk, time.Minute)
	if err := cl.Release(ctx, tk); err != nil {
		t.Fatal(err)
	}
	runLoop40as(t, l, clk, time.Minute)
	listed = false
	held, _ := runLoop40as(t, l, clk, 30*time.Minute)
	if held || pw.HardwareOn() {
		t.Fatalf("setup: let go and off (held %v); truth %s", held, rebootcheck.DescribeTruth(pw))
	}
	cl2 := &reboot.Client{Hosts: store, Key: "fencer2", Now: clk.Now}
	tk2, err := cl2.Request(ctx, "h", power.ModeHard)
	if err != nil {
		t.Fatal(err)
	}
	held, last := runLoop40as(t, l, clk, 5*time.Minute)
	fenced, err := cl2.Fenced(ctx, tk2)
	h, _ := store.Get(ctx, "h")
	if err != nil || !fenced || !held {
		t.Fatalf("second fence on the let-go host not answered in 5 min (fenced %v err %v held %v; last Next %+v; status %+v); truth %s",
			fenced, err, held, last, h.Status, rebootcheck.DescribeTruth(pw))
	}
	if !pw.OffThroughout(offFrom, clk.Real()) {
		t.Fatalf("truth: off from the fence on; %s", rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40ba_OnlineBackDuringSoftOffRestartNotLetGo: the round 50
// High's scenario with a restart (a new Reconciler, no listing) right
// after Online=true: the stored status alone (shutdownMayRun, storedBusy)
// must keep the host until its OS has shut down and it is powered on.
func TestReview40ba_OnlineBackDuringSoftOffRestartNotLetGo(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 100 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	mk := func(listed *bool) (*reboot.Reconciler, reboot.Loop) {
		rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return pw, nil }}
		return rec, rec.Loop(func(context.Context) ([]string, error) {
			if *listed {
				return []string{"h"}, nil
			}
			return nil, nil
		})
	}
	listed := true
	rec, l := mk(&listed)
	runLoop40as(t, l, clk, 2*time.Minute)
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("setup: no power-off; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, err := rec.Reconcile(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOff {
			break
		}
	}
	runLoop40as(t, l, clk, 30*time.Second)
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	listed = false
	_, l = mk(&listed)
	held, last := runLoop40as(t, l, clk, 15*time.Minute)
	h, _ := store.Get(ctx, "h")
	if !pw.HardwareOn() && !held {
		t.Fatalf("restart during the OS's shutdown after Online=true: let go and left off (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40ba_RecordRecreatedDuringOurSoftOffLetGoOffForGood: found by
// the rapid model (TestReview40az_ForgetRuleGroundTruth, -rapid.checks=1500,
// seed 1286738206009785548: "let go at 2m3s with power on=true; now
// on=false under Online=true with no hand change since"). The owner sets
// Online=false on a running host; our soft power-off is accepted and the
// OS starts to shut down. The owner sets Online=true again and the record
// is deleted and created again under the same name (Online=true, status
// wiped), and the host leaves the listing. Only this process knows its
// soft power-off may still land: busy's memory (callsMayLand) counts
// lost calls only, and the new record has no OfflineSoftSince for
// shutdownMayRun. The host reads On, is let go, the OS finishes its
// shutdown, and the Online=true host stays off for good. Ground truth:
// fake.Power.
func TestReview40ba_RecordRecreatedDuringOurSoftOffLetGoOffForGood(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
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
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("setup: no power-off within a minute of Online=false; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, err := rec.Reconcile(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOff {
			break
		}
	}
	runLoop40as(t, l, clk, time.Second)
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: true} }); err != nil {
		t.Fatal(err)
	}
	listed = false
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.HardwareOn() && !held {
		t.Fatalf("Online=true host (record re-created) powered off by our own accepted soft power-off, dropped from the inventory: let go while its OS shut down, left off for good (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}
