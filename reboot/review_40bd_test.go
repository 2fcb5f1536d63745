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

// TestReview40bd_LostSoftOffThenOnlineTrueRestartNeverFoundAgain
// (passing, coverage): the restart version of round 53's High (TestReview40bc_LostSoftOffLands
// AfterOurPowerOnShutsDownLetGoOff). Online=false, our soft power-off's
// answer is lost (it lands 140 s later, the OS takes 28 s); Online=true
// comes while the host still reads On: the same record's status ends
// the enforcement and shows nothing (no OfflineSince, no OfflineOffSeen,
// no press). The host is dropped from the inventory and the process
// restarts (a deploy, a crash) within LostLanding. 9bdc358 keeps the lost
// call and the owed power-on (callsMayLand, owesOn/sawOff) on the
// Reconciler's memory only: the new process's memory is empty and the
// HostLister path (withBusy: storedBusy, then memory.mayChange) reads a
// clean Online=true record, so the host is never reconciled; the lost
// power-off lands and the Online=true host stays off, unwatched, for
// good. The doc (doc.go:113-121) promises a lost power-off "is waited
// out ... since it may land late and then shut the OS down"; the
// reconciler's own first pass after a restart counts what a previous
// process may have sent (startPass), but only for a key it is given.
// Ground truth: fake.Power HardwareOn. It passes: the same record keeps
// the owed power-on (OfflineOffSeen with OfflineSoftSince recent:
// decide_phases shutdownMayRun), which storedBusy counts after the restart.
func TestReview40bd_LostSoftOffThenOnlineTrueRestartNeverFoundAgain(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var mu sync.Mutex
	loseNextOff := false
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 28 * time.Second, Faults: func(c fake.Call) fake.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.Op == fake.OpOff && loseNextOff {
			loseNextOff = false
			return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 140 * time.Second}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return pw, nil }}
	}
	rec := newRec()
	listed := true
	keys := func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	}
	l := rec.Loop(keys)
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
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	// Passes while listed until the record's status is clean (the host
	// still reads On: the enforcement ends).
	listed = false
	runLoop40as(t, l, clk, 30*time.Second)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.HardwareOn() {
		t.Fatalf("setup: the lost power-off landed already; truth %s", rebootcheck.DescribeTruth(pw))
	}
	t.Logf("status before restart: OfflineSince=%v OfflineOffSeen=%v OfflineSoftSince=%v LastPoweredOn=%v OnConfirmed=%v LastPress=%v",
		h.Status.OfflineSince, h.Status.OfflineOffSeen, h.Status.OfflineSoftSince, h.Status.LastPoweredOn, h.Status.OnConfirmed, h.Status.LastPress)
	// Restart: a new process, same store and BMC, the host unlisted.
	rec2 := newRec()
	l2 := rec2.Loop(keys)
	var everListed bool
	end := clk.Real().Add(20 * time.Minute)
	for clk.Real().Before(end) {
		ks, err := l2.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if k == "h" {
				everListed = true
				_, _ = l2.Reconcile(ctx, "h")
			}
		}
		clk.Advance(time.Second)
	}
	if !pw.HardwareOn() {
		t.Fatalf("Online=true host turned off by our lost soft power-off landing after a restart: never reconciled again (listed by the HostLister: %v), left off for good; truth %s",
			everListed, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40bd_ModelNewSeedLostCallLandsAfterRecreateOnlineLetGo
// replays the 40az ground-truth model (forgetRule40az, Online=true check
// on) on a case it found on 9bdc358 with a new seed (-rapid.seed=424242,
// 3,000 checks, failed after 845: -rapid.seed=781677; fail file under
// testdata/rapid/ of this test's name, replayed first, so the test is
// deterministic). Two processes with Guards, BMC pLost 0.4, pRefuse 0.3,
// pUnread 0.3, 20% null readings, button 1. At 27m16s Online=false: proc
// 1 (leader) sends the soft power-off, its answer is lost (it lands at
// 29m09s, within LostLanding); proc 0 (standby) read the record before
// proc 1 wrote it. At 27m17s the record is re-created Online=true (status
// wiped: no trace of the power-off). At 27m38s failover to proc 0, whose
// memory never heard of the call (lead() counts only calls a status it
// read showed: quiet.go:151-152); at 27m44s the host is dropped from the
// inventory and proc 0's pass reports Busy=false (clean record, nothing
// of its own in flight): let go. Proc 1, standing by, keeps the key busy
// (its memory's callsMayLand) but cannot act ("not the leader"). The
// power-off lands at 29m09s: the Online=true host is off, its leader has
// let it go, for good. Ground truth: fake.Power truth (off by command).
// The model's exemption does not apply: the power-off lands after the
// wipe.
func TestReview40bd_ModelNewSeedLostCallLandsAfterRecreateOnlineLetGo(t *testing.T) {
	forgetRule40az(t, true)
}
