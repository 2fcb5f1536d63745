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
