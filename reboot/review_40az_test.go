package reboot_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40az_ForgetRuleGroundTruth drives reboot.Reconciler.Loop with
// the Runner's forget rule, tick by tick (a key is passed while the
// listing, with the HostLister's stored-busy hosts, holds it, or while
// the last pass that could tell reported Next.Busy), over random actions:
// Online flips, hand power-ons and power-offs, listings that drop and
// re-add the host, restarts (a new Reconciler on the same store), wall
// clock jumps, a BMC that lies (stale reads, no Transitioning, unreadable
// reads) and loses or refuses power calls, some landing late (within
// LostLanding). Ground truth: fake.Power.
//
// Safety: when the key is let go, the host's power matches its record's
// Online (off under Online=false, on under Online=true) unless a hand
// power change came too recently for any reading to show it; and while
// it stays let go, with no hand change and no change of its record that
// relists it, its power does not change (no call of ours lands late).
// Liveness: dropped from the listing, with the faults still on and no
// more hand changes, the host is let go within 40 minutes, except for the
// documented trade-offs (Online=false with an unconfirmed power-on of
// ours, or with a pending reboot whose hold someone broke: held, and kept
// off).
func TestReview40az_ForgetRuleGroundTruth(t *testing.T) { forgetRule40az(t, true) }

// TestReview40az_ForgetRuleGroundTruthOnlineFalse is
// TestReview40az_ForgetRuleGroundTruth without its check of a host let go
// off under Online=true (TestReview40az_OnlineBackDuringSoftOffLetGoOffForGood),
// so that rapid finds what else breaks.
func TestReview40az_ForgetRuleGroundTruthOnlineFalse(t *testing.T) { forgetRule40az(t, false) }

func forgetRule40az(t *testing.T, checkOnlineTrue bool) {
	var knownOffWrites, letGoOffline, failovers int
	defer func() {
		t.Logf("coverage: idle's known-off writes %d, let-go under Online=false %d, failovers %d", knownOffWrites, letGoOffline, failovers)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := reboot.DefaultConfig()
		grace := 2 * time.Minute
		var mu sync.Mutex
		rng := rand.New(rand.NewSource(rapid.Int64().Draw(rt, "seed")))
		pLost := rapid.Float64Range(0, 0.4).Draw(rt, "pLost")
		pRefuse := rapid.Float64Range(0, 0.3).Draw(rt, "pRefuse")
		pUnread := rapid.Float64Range(0, 0.3).Draw(rt, "pUnread")
		dead := false // every call times out, not carried out
		var deadEnded time.Time
		faults := func(c fake.Call) fake.Fault {
			mu.Lock()
			defer mu.Unlock()
			if dead {
				return fake.Fault{Kind: fake.FaultTimeout}
			}
			if c.Op == fake.OpState {
				if rng.Float64() < pUnread {
					return fake.Fault{Kind: fake.FaultTimeout}
				}
				return fake.Fault{}
			}
			switch x := rng.Float64(); {
			case x < pLost:
				return fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: time.Duration(rng.Int63n(int64(150 * time.Second)))}
			case x < pLost+pRefuse:
				return fake.Fault{Kind: fake.FaultFailed}
			}
			return fake.Fault{}
		}
		initial := power.StateOn
		if rapid.Bool().Draw(rt, "initialOff") {
			initial = power.StateOff
		}
		earlyOff := time.Duration(rapid.IntRange(0, 5).Draw(rt, "earlyOff")) * time.Second
		pw := fake.NewPower(clk.Real, fake.PowerConfig{
			Initial:   initial,
			SoftDelay: time.Duration(rapid.IntRange(0, 60).Draw(rt, "softDelay")) * time.Second,
			Lag:       time.Duration(rapid.IntRange(0, 5).Draw(rt, "lag")) * time.Second,
			Faults:    faults,
			Button:    fake.ButtonKind(rapid.IntRange(0, 2).Draw(rt, "button")),
			Report: fake.Report{
				Flap:            rapid.Bool().Draw(rt, "flap"),
				EarlyOff:        earlyOff,
				Unknown:         rapid.Float64Range(0, 0.2).Draw(rt, "unknown"),
				Stale:           time.Duration(rapid.IntRange(0, 25).Draw(rt, "stale")) * time.Second,
				NoTransitioning: rapid.Bool().Draw(rt, "noTrans"),
			},
		})
		cfg.OffSettle = earlyOff // A1's bound for this BMC
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: rapid.Bool().Draw(rt, "online")})
		leader := 0
		twoProcs := rapid.Bool().Draw(rt, "standby") // a second process standing by, a Guard each
		newRec := func(me int) *reboot.Reconciler {
			r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(string) (power.Controller, error) { return pw, nil }}
			if twoProcs {
				r.Guard = guard40az{leader: &leader, me: me}
			}
			return r
		}
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
		}
		nprocs := 1
		if twoProcs {
			nprocs = 2
		}
		procs := make([]*proc, nprocs)
		for i := range procs {
			r := newRec(i)
			// held when the test starts: busy until its first pass tells
			procs[i] = &proc{rec: r, l: r.Loop(keysFn), busy: true, held: true}
		}
		held := true // the leader holds the key
		start := clk.Real()
		lastHand := start.Add(-time.Hour) // Real time of the last hand change
		var recreatedAt time.Time         // Real time of the last record wipe (action 10)
		var log []string
		logf := func(f string, a ...any) {
			log = append(log, fmt.Sprintf("%v ", clk.Real().Sub(start))+fmt.Sprintf(f, a...))
		}
		fail := func(f string, a ...any) {
			h, _ := store.Get(ctx, "h")
			tail := log
			if len(tail) > 60 {
				tail = tail[len(tail)-60:]
			}
			for _, s := range tail {
				rt.Log(s)
			}
			rt.Fatalf(f+"\nstatus %+v\ntruth %s", append(a, h.Status, rebootcheck.DescribeTruth(pw))...)
		}
		cl := &reboot.Client{Hosts: store, Key: "fencer", Now: clk.Now}
		var tk *reboot.Ticket
		var fencedAt time.Time // Real time Fenced was first true for tk
		// Let-go episode.
		var goneAt time.Time
		var goneOn, gone, checked, hidden bool
		settle := 10 * time.Second
		tick := func() {
			for i, pr := range procs {
				keys, err := pr.l.Keys(ctx)
				if err != nil {
					fail("keys: %v", err)
				}
				inKeys := slices.Contains(keys, "h")
				pr.held = inKeys || pr.busy
				if pr.held {
					// Reconciler.Loop's Reconcile, with the decision logged.
					res, err := pr.rec.Reconcile(ctx, "h")
					n := reboot.Next{Busy: res.Busy, Idle: err != nil && !res.Busy}
					if err == nil || n.Busy || n.Idle {
						pr.busy = n.Busy
					}
					logf("proc %d (leader %d) pass busy=%v idle=%v err=%v listed=%v hw=%v: %v %v %q perr=%v", i, leader, n.Busy, n.Idle, err, listed, pw.HardwareOn(),
						res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
					pr.held = inKeys || pr.busy
					if res.Decision.Reason == "Online is false: off" {
						knownOffWrites++
					}
				}
			}
			nowHeld := procs[leader].held
			h, err := store.Get(ctx, "h")
			if err != nil {
				fail("get: %v", err)
			}
			if tk != nil {
				if fencedAt.IsZero() {
					if f, err := cl.Fenced(ctx, *tk); err == nil && f {
						fencedAt = clk.Real()
						logf("fenced")
					}
				} else {
					// No power-on sent while the fence is held (a lost one sent
					// before the request may land: documented, A5).
					for _, c := range pw.Calls() {
						if c.Op == fake.OpOn && !c.At.Before(fencedAt) {
							fail("power-on sent at %v to a host fenced at %v whose request is still held", c.At.Sub(start), fencedAt.Sub(start))
						}
					}
				}
				if !nowHeld {
					fail("let go while a fence request is held")
				}
			}
			if held && !nowHeld {
				gone, goneAt, goneOn, checked = true, clk.Real(), pw.HardwareOn(), false
				mu.Lock()
				deadRecent := dead || clk.Real().Sub(deadEnded) < grace // a dead BMC hides a hand change
				mu.Unlock()
				hidden = clk.Real().Sub(lastHand) <= grace || deadRecent
				if !h.Online {
					letGoOffline++
				}
				logf("let go: online=%v hw=%v hidden=%v status %+v", h.Online, goneOn, hidden, h.Status)
			}
			if nowHeld {
				gone = false
			}
			// Checked settle (10s: EarlyOff, Lag) after the let-go, while
			// still let go, with no hand change since.
			if gone && !checked && !hidden && clk.Real().Sub(goneAt) >= settle && lastHand.Before(goneAt) {
				checked = true
				on := pw.HardwareOn()
				if !h.Online && on {
					fail("let go at %v while running under Online=false (still running %v later)", goneAt.Sub(start), settle)
				}
				tr := pw.Truth()
				// A power-off that landed before the record was wiped and
				// re-created (action 10) belongs to the old record, whose
				// work it did; the new record, unlisted and showing no work
				// of ours, is its owner's to list. One landing at or after
				// the wipe is still ours to watch (the process remembers it:
				// memory.offSent).
				offByUs := len(tr) > 0 && !tr[len(tr)-1].On && tr[len(tr)-1].Cause == fake.CauseCommand &&
					!tr[len(tr)-1].At.Before(recreatedAt)
				if checkOnlineTrue && h.Online && !on && !h.Deprovisioned && offByUs {
					fail("let go at %v while off under Online=true, powered off by a call of ours", goneAt.Sub(start))
				}
				goneOn = on
			}
			if gone && checked && lastHand.Before(goneAt) && pw.HardwareOn() != goneOn && (checkOnlineTrue || !h.Online) &&
				pw.HardwareOn() != h.Online {
				fail("let go at %v with power on=%v; now on=%v under Online=%v with no hand change since (a call of ours landed unwatched)",
					goneAt.Sub(start), goneOn, pw.HardwareOn(), h.Online)
			}
			held = nowHeld
			clk.Advance(time.Second)
		}
		run := func(d time.Duration) {
			end := clk.Real().Add(d)
			for clk.Real().Before(end) {
				tick()
			}
		}
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch a := rapid.IntRange(0, 10).Draw(rt, "action"); a {
			case 0:
				var on bool
				_ = store.Mutate("h", func(h *reboot.Host) { h.Online = !h.Online; on = h.Online })
				logf("action: Online=%v", on)
			case 1:
				pw.OutOfBandOn()
				lastHand = clk.Real()
				logf("action: hand on")
			case 2:
				pw.OutOfBandOff()
				lastHand = clk.Real()
				logf("action: hand off")
			case 3:
				listed = !listed
				logf("action: listed=%v", listed)
			case 4:
				r := newRec(leader)
				procs[leader] = &proc{rec: r, l: r.Loop(keysFn), held: held}
				logf("action: restart of the leader")
			case 10:
				// The record deleted and created again under the same name
				// (a store with no Delete: its status and annotations wiped).
				on := rapid.Bool().Draw(rt, "recreateOnline")
				_ = store.Mutate("h", func(h *reboot.Host) {
					*h = reboot.Host{Name: "h", Online: on}
				})
				tk = nil
				recreatedAt = clk.Real()
				logf("action: record re-created, Online=%v", on)
			case 9:
				if twoProcs {
					leader = 1 - leader
					failovers++
					logf("action: failover to %d", leader)
				}
			case 6:
				mu.Lock()
				dead = !dead
				if !dead {
					deadEnded = clk.Real()
				}
				logf("action: dead=%v", dead)
				mu.Unlock()
			case 7:
				if tk == nil {
					t, err := cl.Request(ctx, "h", power.ModeHard)
					if err != nil {
						fail("request: %v", err)
					}
					tk, fencedAt = &t, time.Time{}
					logf("action: fence request")
				} else {
					if err := cl.Release(ctx, *tk); err != nil {
						fail("release: %v", err)
					}
					tk = nil
					logf("action: release")
				}
			case 5:
				d := time.Duration(rapid.IntRange(-600, 600).Draw(rt, "jump")) * time.Second
				clk.Jump(d)
				logf("action: clock jump %v", d)
			}
			run(time.Duration(rapid.IntRange(1, 600).Draw(rt, "run")) * time.Second)
		}
		// Liveness: dropped, no more hand changes, faults still on.
		if tk != nil {
			if err := cl.Release(ctx, *tk); err != nil {
				fail("release: %v", err)
			}
			tk = nil
		}
		listed = false
		logf("final: unlisted")
		run(40 * time.Minute)
		h, _ := store.Get(ctx, "h")
		mu.Lock()
		deadNow := dead
		mu.Unlock()
		if held && !deadNow {
			if !h.Online && !h.Status.LastPoweredOn.IsZero() && !h.Status.OnConfirmed.Equal(h.Status.LastPoweredOn) {
				if pw.HardwareOn() {
					fail("held under Online=false for an unconfirmed power-on, yet running")
				}
				return // the documented trade-off
			}
			if !h.Online && h.Status.Pending() && h.Status.HoldBroken.After(h.Status.LastPoweredOff) {
				if pw.HardwareOn() {
					fail("held under Online=false for a broken hold, yet running")
				}
				return // the documented trade-off: a hold broken under Online=false
			}
			fail("unlisted host still held after 40 min with no hand change (online=%v)", h.Online)
		}
	})
}

// TestReview40az_OnlineBackDuringSoftOffLetGoOffForGood: an Online=false
// enforcement sends a soft power-off (accepted; the OS takes 20 s to shut
// down, an honest BMC: no stale reads, no faults); two seconds later the
// owner sets Online=true again and the host leaves the inventory. The
// host still reads On (it is on: its OS is shutting down). idle's Online
// branch ends the enforcement on that On reading (endOffline,
// decide_phases.go:389-391: "the host reads on"), dropping the power-on
// owed, and busy (busy.go:15-24, statusBusy) counts nothing of the soft
// power-off whose shutdown is under way (Status.OfflineSoftSince, which
// actedBound.offlineOffRecent counts for a restart): the pass reports not
// busy and the key is let go. The shutdown completes: the host, Online=
// true, powered off by this controller, stays off for good, nobody reads
// it again. Listed, it would have been powered on at the first Off
// reading. Ground truth: fake.Power.
func TestReview40az_OnlineBackDuringSoftOffLetGoOffForGood(t *testing.T) {
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
	start := clk.Real()
	runLoop40as(t, l, clk, 2*time.Minute)
	if !pw.HardwareOn() {
		t.Fatalf("setup: on; truth %s", rebootcheck.DescribeTruth(pw))
	}
	offAt := clk.Real()
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
	// The owner changes their mind; the host leaves the inventory.
	if err := store.Mutate("h", func(h *reboot.Host) { h.Online = true }); err != nil {
		t.Fatal(err)
	}
	listed = false
	held, last := runLoop40as(t, l, clk, 10*time.Minute)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.HardwareOn() && !held {
		t.Fatalf("Online=true host powered off by our own soft power-off (Online=false at %v, Online=true 2s after it), dropped from the inventory, let go while off and left off for good (last Next %+v; status %+v); truth %s",
			offAt.Sub(start), last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}

// TestReview40az_ReleasedFenceUnderOnlineFalseNeverForgotten: a fencer
// requests a hard power-off (Client.Request) of a running host; the host
// is fenced (Client.Fenced, truth off). While it is held the owner sets
// Online=false (the node is to stay down), then the fencer releases its
// request, and the host leaves the inventory. Nothing of the controller's
// is under way: no request, the host known off (read Off by readings that
// cannot echo, truth off all along since the fence), no power-on of ours
// ever decided. But the reboot stays pending (PendingRebootSince: its
// power-on waits for Online, decide_phases.go:287-289 "off; held while
// Online is false"), and statusBusy counts a pending reboot as busy
// (busy.go:67): the key is never let go, the host is passed every
// PollInterval for as long as Online stays false, and the HostLister adds
// it to every listing after any restart. The package doc (doc.go:113-121)
// says an Online=false host known off counts as idle, the one exception
// being an unconfirmed power-on of ours (there is none here); idle's new
// write (01d1abd) makes exactly this host idle when no reboot was
// pending. Ground truth: fake.Power.
func TestReview40az_ReleasedFenceUnderOnlineFalseNeverForgotten(t *testing.T) {
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
	start := clk.Real()
	runLoop40as(t, l, clk, 2*time.Minute)
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: clk.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	if err != nil {
		t.Fatal(err)
	}
	runLoop40as(t, l, clk, 2*time.Minute)
	fenced, err := cl.Fenced(ctx, tk)
	if err != nil || !fenced || pw.HardwareOn() {
		t.Fatalf("setup: fenced within 2 min (fenced %v, err %v); truth %s", fenced, err, rebootcheck.DescribeTruth(pw))
	}
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
	held, last := runLoop40as(t, l, clk, 30*time.Minute)
	h, err := store.Get(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if !pw.OffThroughout(offFrom, clk.Real()) {
		t.Fatalf("truth: off from the fence on; %s", rebootcheck.DescribeTruth(pw))
	}
	if held {
		t.Fatalf("Online=false host known off (truth off since %v), its fence released, no power-on of ours ever decided, dropped from the inventory: still held 30 min later (last Next %+v; PendingRebootSince %v LastPoweredOn %v OfflineSince %v OfflineOffSeen %v); truth %s",
			offFrom.Sub(start), last, h.Status.PendingRebootSince, h.Status.LastPoweredOn, h.Status.OfflineSince, h.Status.OfflineOffSeen, rebootcheck.DescribeTruth(pw))
	}
}

// guard40az is a Guard whose process leads while *leader is me.
type guard40az struct {
	leader *int
	me     int
}

func (g guard40az) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if *g.leader != g.me {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}
