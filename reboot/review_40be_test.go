package reboot_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// guard40be is a Guard whose process leads while *leader is me.
type guard40be struct {
	leader *int
	me     int
}

func (g guard40be) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if *g.leader != g.me {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// TestReview40be_FailoverWithNoPassNeverOpensWindow: round 54's High
// (a leader's lost soft power-off, the record re-created Online=true, a
// failover, the host dropped) with one change of order: the host is
// dropped from the inventory while proc 0 still stands by, so proc 0
// lets its key go before the failover (its own window, from its start,
// is long over; the clean record shows nothing). Proc 1 (the old leader,
// which remembers its power-off) dies; proc 0 now leads. Its Runner holds
// no key, so no pass runs, no Hold is made (probe/noteHold), leadAt never
// moves, and othersMayLand never reopens the window: its HostLister
// listing never adds the record. The lost power-off lands: the Online=true
// host stays off for good with a leader and a HostLister store. Ground
// truth: fake.Power.
func TestReview40be_FailoverWithNoPassNeverOpensWindow(t *testing.T) {
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
			return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 150 * time.Second}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	leader := 1
	listed := true
	keysFn := func(context.Context) ([]string, error) {
		if listed {
			return []string{"h"}, nil
		}
		return nil, nil
	}
	type proc struct {
		rec        *reboot.Reconciler
		l          reboot.Loop
		busy, held bool
		dead       bool
	}
	procs := make([]*proc, 2)
	for i := range procs {
		r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Guard: guard40be{leader: &leader, me: i},
			Power: func(string) (power.Controller, error) { return pw, nil }}
		procs[i] = &proc{rec: r, l: r.Loop(keysFn), busy: true, held: true}
	}
	var lastDecision reboot.Decision
	tick := func() {
		for i, pr := range procs {
			if pr.dead {
				continue
			}
			keys, err := pr.l.Keys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pr.held = slices.Contains(keys, "h") || pr.busy
			if pr.held {
				res, err := pr.rec.Reconcile(ctx, "h")
				n := reboot.Next{Busy: res.Busy, Idle: err != nil && !res.Busy}
				if err == nil || n.Busy || n.Idle {
					pr.busy = n.Busy
				}
				pr.held = slices.Contains(keys, "h") || pr.busy
				if i == leader {
					lastDecision = res.Decision
				}
			}
		}
		clk.Advance(time.Second)
	}
	// Both processes run for 15 min: their start windows are over.
	for range 15 * 60 {
		tick()
	}
	mu.Lock()
	loseNextOff = true
	mu.Unlock()
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	sent := false
	for range 120 {
		tick()
		if lastDecision.Power == reboot.ActionPowerOff {
			sent = true
			break
		}
	}
	if !sent || !pw.HardwareOn() {
		t.Fatalf("setup: a lost power-off, the host still on; truth %s", rebootcheck.DescribeTruth(pw))
	}
	// The record is wiped and handed back Online=true; the host is dropped
	// from the inventory.
	if err := store.Mutate("h", func(h *reboot.Host) { *h = reboot.Host{Name: "h", Online: true} }); err != nil {
		t.Fatal(err)
	}
	wiped := clk.Real()
	listed = false
	for range 30 {
		tick()
		if !procs[0].held {
			break
		}
	}
	if procs[0].held {
		t.Skipf("setup: the standby still holds the host")
	}
	if !procs[1].held {
		t.Fatalf("setup: the leader let go of its own lost power-off")
	}
	standbyGone := clk.Real().Sub(wiped)
	// Failover: proc 1 dies, proc 0 leads.
	procs[1].dead = true
	leader = 0
	failAt := clk.Real().Sub(wiped)
	for range 20 * 60 {
		tick()
	}
	landed := false
	for _, c := range pw.Truth() {
		landed = landed || !c.On && c.At.After(wiped)
	}
	if !landed {
		t.Fatalf("setup: the lost power-off never landed after the wipe; truth %s", rebootcheck.DescribeTruth(pw))
	}
	h, _ := store.Get(ctx, "h")
	if h.Online && !pw.HardwareOn() {
		t.Fatalf("Online=true host left off for good: standby let go %v after the wipe, failover at %v, the old leader's lost power-off landed after; new leader holds it: %v; truth %s",
			standbyGone, failAt, procs[0].held, rebootcheck.DescribeTruth(pw))
	}
}

// flapGuard40be leads always, but refuses every Hold asked during the first
// two seconds of every period (a lease renewal that comes late: the
// guard's margin), with no other leader ever. It is a reboot.GuardTerm
// whose Term never changes (the lease is held throughout), as
// kube.LeaseGuard's and etcd.Leadership.Guard's are in that case (added
// by the fixer: a plain Guard cannot tell such a refusal from a lost
// lease, and reboot.GuardTerm's doc says the window then reopens).
type flapGuard40be struct {
	clk    *fake.Clock
	period time.Duration
}

func (g flapGuard40be) Term() uint64 { return 1 }

func (g flapGuard40be) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.clk.Monotonic()%g.period < 2*time.Second {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// TestReview40be_RefusedHoldEveryFewMinutesKeepsIdleUnlistedHostForEver:
// the only process leads throughout, but its Guard refuses a Hold for two
// seconds every 5 min (a late lease renewal; no other leader ever). Every
// success after a refusal moves leadAt (noteHold), so othersMayLand's
// window (LostLanding + 2x SoftTimeout + StaleReads, 9 min by default)
// never closes: an idle Online=true host with a sane BMC, dropped from the
// inventory, is never let go (and a HostLister lists every record for
// ever). Liveness with the fault on: it must be let go in bounded time.
func TestReview40be_RefusedHoldEveryFewMinutesKeepsIdleUnlistedHostForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "x", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Guard: flapGuard40be{clk: clk, period: 5 * time.Minute},
		Power: func(string) (power.Controller, error) { return pw, nil }}
	listed := []string{"h", "x"}
	l := rec.Loop(func(context.Context) ([]string, error) { return listed, nil })
	held := map[string]bool{"h": true, "x": true}
	busy := map[string]bool{"h": true, "x": true}
	var dropped, letGo time.Duration
	for s := 0; s < 90*60; s++ {
		if s == 15*60 {
			listed = []string{"x"} // h dropped; x stays listed
			dropped = clk.Monotonic()
		}
		keys, err := l.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"h", "x"} {
			held[k] = slices.Contains(keys, k) || busy[k]
			if !held[k] {
				continue
			}
			if s%10 != 0 && k == "x" {
				continue // x: a pass every 10 s (its Resync)
			}
			n, err := l.Reconcile(ctx, k)
			if err == nil || n.Busy || n.Idle {
				busy[k] = n.Busy
			}
			held[k] = slices.Contains(keys, k) || busy[k]
		}
		if dropped > 0 && !held["h"] && letGo == 0 {
			letGo = clk.Monotonic()
		}
		clk.Advance(time.Second)
	}
	if !pw.HardwareOn() {
		t.Fatalf("setup: host off; truth %s", rebootcheck.DescribeTruth(pw))
	}
	if letGo == 0 {
		t.Fatalf("idle Online=true host (BMC sane, on throughout), dropped from the inventory at %v, still held 75 min later: a Hold refused for 2 s every 5 min (no other leader ever) reopens othersMayLand's %v window at each success",
			dropped, reboot.LostLandingOf(cfg)+2*cfg.SoftTimeout+cfg.StaleReads)
	}
}
