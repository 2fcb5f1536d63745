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
