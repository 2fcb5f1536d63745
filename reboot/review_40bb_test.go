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

// TestReview40bb_RecordDeletedAndRecreatedDuringOurSoftOffLetGoOffForGood:
// 8595309 keeps an Online host busy while a power-off of ours may still
// turn it off (memory.offSent, busy.go shutdownMayRun), "whatever the
// wall clock or a wiped record says", and the 40az model's exemption
// says a power-off landing at or after the wipe "is still ours to watch
// (the process remembers it: memory.offSent)". But when the wipe is a
// delete the Loop sees (a pass between delete and re-create: ErrNotFound,
// Loop calls Reconciler.Forget), forgotten() (reconciler.go) builds the
// new memory without offSent/offSet (and with lastOn = the Forget, after
// offSent): the process no longer remembers its soft power-off. Same
// story as round 51's Medium (TestReview40ba_RecordRecreatedDuring
// OurSoftOffLetGoOffForGood) with the deletion observed, as a kube
// informer normally observes it: Online=false, our soft power-off is
// accepted, the OS takes 20 s to shut down; the record is deleted (a
// pass: Release), created again Online=true (re-registered) while the
// key is still listed for a pass, then dropped from the inventory. The
// pass reads it On (still shutting down), not busy: let go; the OS shuts
// down and the Online=true host stays off, unwatched, for good. Ground
// truth: fake.Power HardwareOn.
func TestReview40bb_RecordDeletedAndRecreatedDuringOurSoftOffLetGoOffForGood(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := &goneStore40ax{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
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
	// Deleted: the Loop's pass sees ErrNotFound, Forgets and releases.
	store.gone.Store(true)
	n, err := l.Reconcile(ctx, "h")
	if err != nil || !n.Release {
		t.Fatalf("setup: deletion not seen: %+v %v", n, err)
	}
	clk.Advance(time.Second)
	// Created again, Online=true, fresh record; still listed for a pass.
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: true} }); err != nil {
		t.Fatal(err)
	}
	store.gone.Store(false)
	if !pw.HardwareOn() {
		t.Fatalf("setup: the soft power-off landed already; truth %s", rebootcheck.DescribeTruth(pw))
	}
	runLoop40as(t, l, clk, time.Second)
	listed = false
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.HardwareOn() && !held {
		t.Fatalf("Online=true host (record deleted and re-created) powered off by our own accepted soft power-off, dropped from the inventory: let go while its OS shut down, left off for good (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40bb_RecordDeletedAndRecreatedUnlistedDuringOurSoftOffNeverFoundAgain:
// the same deletion (the Loop's pass sees ErrNotFound: Forget, Release)
// and re-creation Online=true while our accepted soft power-off still
// shuts the OS down, the key not listed by keys after the deletion. The
// 40az model's exemption says a power-off landing after the wipe "is
// still ours to watch (the process remembers it: memory.offSent)"; but
// the HostLister path (withBusy, storedBusy) reads the stored record
// only, never the Reconciler's memory: the fresh record shows no work,
// so it is never listed, never reconciled, and the host our power-off
// turned off stays off under Online=true for good. Ground truth:
// fake.Power HardwareOn.
func TestReview40bb_RecordDeletedAndRecreatedUnlistedDuringOurSoftOffNeverFoundAgain(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := &goneStore40ax{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})}
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
	listed = false
	store.gone.Store(true)
	n, err := l.Reconcile(ctx, "h")
	if err != nil || !n.Release {
		t.Fatalf("setup: deletion not seen: %+v %v", n, err)
	}
	clk.Advance(time.Second)
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: true} }); err != nil {
		t.Fatal(err)
	}
	store.gone.Store(false)
	if !pw.HardwareOn() {
		t.Fatalf("setup: the soft power-off landed already; truth %s", rebootcheck.DescribeTruth(pw))
	}
	everListed := false
	for end := clk.Real().Add(10 * time.Minute); clk.Real().Before(end); clk.Advance(time.Second) {
		keys, err := l.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k == "h" {
				everListed = true
				if _, err := l.Reconcile(ctx, "h"); err != nil {
					t.Logf("pass: %v", err)
				}
			}
		}
	}
	if !pw.HardwareOn() {
		t.Fatalf("Online=true host (record deleted and re-created, unlisted) powered off by our own accepted soft power-off after the deletion: never reconciled again (listed by the HostLister: %v), left off for good; truth %s",
			everListed, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40bb_LostPowerOnThenRecordRecreatedOfflineLetGoRunsUnderOnlineFalse
// (found by the 40az rapid model, -rapid.checks=3000): a power-on of
// ours whose answer is lost (timeout, carried out Late = 60 s, inside
// A5's LostLanding = SoftTimeout = 180 s) is remembered only as
// memory.lastOn; callsMayLand (busy.go) counts lost power-offs and
// presses, never a lost power-on, and the record, the one place an
// unconfirmed power-on of ours holds the host under Online=false (the
// doc.go trade-off), is wiped: the record re-created Online=false (a
// re-registration, same name). Its passes read the host Off (the
// power-on has not landed), record it known off, and it is let go
// (unlisted); the power-on lands a minute later and the server runs
// under Online=false, unwatched, for good. 8595309 keeps an Online host
// for a power-off of ours "whatever ... a wiped record says"; the
// symmetric power-on is not kept. Ground truth: fake.Power HardwareOn.
func TestReview40bb_LostPowerOnThenRecordRecreatedOfflineLetGoRunsUnderOnlineFalse(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	lostOn := true
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff,
		Faults: func(c fake.Call) fake.Fault {
			if c.Op == fake.OpOn && lostOn {
				lostOn = false
				return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 60 * time.Second}
			}
			return fake.Fault{}
		}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	listed := true
	l := rec.Loop(func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	})
	runLoop40as(t, l, clk, time.Minute)
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("setup: no power-on within a minute of Online=true; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, err := rec.Reconcile(ctx, "h")
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOn {
			t.Logf("power-on: %v", err)
			break
		}
	}
	// Re-registered Online=false (status wiped), dropped from the inventory.
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: false} }); err != nil {
		t.Fatal(err)
	}
	listed = false
	if pw.HardwareOn() {
		t.Fatalf("setup: the power-on landed already; truth %s", rebootcheck.DescribeTruth(pw))
	}
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	if pw.HardwareOn() && !held {
		h, _ := store.Get(ctx, "h")
		t.Fatalf("Online=false host powered on by our own lost power-on after it was let go: runs under Online=false, unwatched (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40bb_LostPowerOnThenOnlineFalseSameRecord (passing, control
// for the test above): the same lost power-on with Online=false set on
// the same record: its status holds the host (doc.go trade-off).
func TestReview40bb_LostPowerOnThenOnlineFalseSameRecord(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	lostOn := true
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff,
		Faults: func(c fake.Call) fake.Fault {
			if c.Op == fake.OpOn && lostOn {
				lostOn = false
				return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 60 * time.Second}
			}
			return fake.Fault{}
		}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	listed := true
	l := rec.Loop(func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	})
	runLoop40as(t, l, clk, time.Minute)
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > 60 {
			t.Fatalf("setup: no power-on within a minute of Online=true; truth %s", rebootcheck.DescribeTruth(pw))
		}
		res, err := rec.Reconcile(ctx, "h")
		clk.Advance(time.Second)
		if res.Decision.Power == reboot.ActionPowerOn {
			t.Logf("power-on: %v", err)
			break
		}
	}
	// Re-registered Online=false (status wiped), dropped from the inventory.
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	listed = false
	if pw.HardwareOn() {
		t.Fatalf("setup: the power-on landed already; truth %s", rebootcheck.DescribeTruth(pw))
	}
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	if pw.HardwareOn() && !held {
		h, _ := store.Get(ctx, "h")
		t.Fatalf("Online=false host powered on by our own lost power-on after it was let go: runs under Online=false, unwatched (last Next %+v; status %+v); truth %s",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}
