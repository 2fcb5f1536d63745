package reboot_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40bf_ForgetRuleGroundTruthGuardTerm is the 40az model
// (review_40az_test.go) with a reboot.GuardTerm guard: each process's Term
// changes when it begins to lead, the leader's Hold is refused now and
// then inside its lease's margin (same Term: no other leader), and a
// quiet failover pauses the leader (it asks nothing) while the other
// leads, after which the first takes the lease back without having seen
// a refusal. Ground truth: fake.Power.
func TestReview40bf_ForgetRuleGroundTruthGuardTerm(t *testing.T) { forgetRule40bf(t, true, 1) }

// TestReview40bf_ForgetRuleGroundTruthGuardTermQuietFailovers is the same
// model without refusals inside the margin (which
// TestReview40bf_MarginRefusalNeverConfirmsPowerOnHostHeldForEver shows
// keep a host for ever), so that rapid looks for the rest: failovers with
// a new Term, quiet ones included.
func TestReview40bf_ForgetRuleGroundTruthGuardTermQuietFailovers(t *testing.T) {
	forgetRule40bf(t, true, 0)
}

func forgetRule40bf(t *testing.T, checkOnlineTrue bool, marginScale float64) {
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
		// each process's Term: bumped when it begins to lead; non-zero
		// (GuardTerm: zero says "not held"; the fixer's change)
		terms := [2]uint64{1, 1}
		var margin [2]bool // the leader's Hold refused inside its lease's margin (same Term)
		pMargin := rapid.Float64Range(0, 0.3).Draw(rt, "pMargin") * marginScale
		var paused [2]bool                           // a process paused (not ticked): asks nothing
		twoProcs := rapid.Bool().Draw(rt, "standby") // a second process standing by, a Guard each
		newRec := func(me int) *reboot.Reconciler {
			r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Power: func(string) (power.Controller, error) { return pw, nil }}
			if twoProcs {
				r.Guard = guard40bf{leader: &leader, me: me, terms: &terms, margin: &margin}
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
			if twoProcs {
				mu.Lock()
				margin[leader] = rng.Float64() < pMargin
				margin[1-leader] = false
				mu.Unlock()
			}
			for i, pr := range procs {
				if paused[i] {
					continue
				}
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
					terms[leader]++
					failovers++
					logf("action: failover to %d", leader)
				}
			case 8:
				// A quiet failover: the leader is paused (asks nothing),
				// the other leads for a while, then the first takes the
				// lease back (a new Term) and resumes, having seen no
				// refusal.
				if twoProcs {
					was := leader
					paused[was] = true
					leader = 1 - was
					terms[leader]++
					failovers++
					logf("action: quiet failover from %d", was)
					run(time.Duration(rapid.IntRange(1, 300).Draw(rt, "stint")) * time.Second)
					leader = was
					terms[leader]++
					paused[was] = false
					logf("action: %d leads again", was)
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

// guard40bf is guard40az with a Term (reboot.GuardTerm) and refusals
// inside the margin.
type guard40bf struct {
	leader *int
	me     int
	terms  *[2]uint64
	margin *[2]bool
}

func (g guard40bf) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if *g.leader != g.me || g.margin[g.me] {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// Term is zero while this process does not lead (the contract of
// reboot.GuardTerm as round 56's fix states it: the fixer's change, the
// reviewer's Term returned the last term whoever led).
func (g guard40bf) Term() uint64 {
	if *g.leader != g.me {
		return 0
	}
	return g.terms[g.me]
}

// TestReview40bf_MarginRefusalNeverConfirmsPowerOnHostHeldForEver: the
// only process leads throughout; its Guard is a reboot.GuardTerm whose Term
// never changes (flapGuard40be: the lease held throughout, a Hold refused
// for 2 s every 20 s inside its margin, as kube.LeaseGuard's and etcd's
// Guard are then: GuardTerm's doc says such a refusal is no new
// leadership). Host h, Online=true, is on (a sane BMC) after a power-on
// of ours not yet confirmed (LastPoweredOn set, OnConfirmed not). A pass
// run during a refusal is a standby's pass, and a standby counts any
// LastPoweredOn as a power-on sent now (memory.quietFor): QuietFor never
// reaches StaleReads (30 s) in a leading pass, OnConfirmed is never
// written, the record stays busy (statusBusy) and h, dropped from the
// inventory, is never let go. Liveness with the fault on: it must be
// confirmed and let go in bounded time (without refusals: within a
// minute).
func TestReview40bf_MarginRefusalNeverConfirmsPowerOnHostHeldForEver(t *testing.T) {
	for _, period := range []time.Duration{time.Hour, 20 * time.Second} {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := reboot.DefaultConfig()
		pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOn})
		sent := clk.Now().Add(-10 * time.Second)
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true, Status: reboot.Status{LastPoweredOn: sent}})
		var g reboot.Guard = flapGuard40be{clk: clk, period: period}
		if _, ok := g.(reboot.GuardTerm); !ok {
			t.Fatal("setup: flapGuard40be is no GuardTerm")
		}
		clk.Advance(3 * time.Second) // out of the first refusal
		rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: g,
			Power: func(string) (power.Controller, error) { return pw, nil }}
		listed := []string{"h"}
		l := rec.Loop(func(context.Context) ([]string, error) { return listed, nil })
		busy := true
		var dropped, letGo time.Duration
		for s := 0; s < 60*60; s++ {
			if s == 60 {
				listed = nil
				dropped = clk.Monotonic()
			}
			keys, err := l.Keys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inKeys := slices.Contains(keys, "h")
			if inKeys || busy {
				n, err := l.Reconcile(ctx, "h")
				if err == nil || n.Busy || n.Idle {
					busy = n.Busy
				}
			}
			if dropped > 0 && !inKeys && !busy && letGo == 0 {
				letGo = clk.Monotonic()
			}
			clk.Advance(time.Second)
		}
		h, _ := store.Get(ctx, "h")
		if !pw.HardwareOn() {
			t.Fatalf("setup: host off; truth %s", rebootcheck.DescribeTruth(pw))
		}
		if letGo == 0 {
			t.Fatalf("refusal every %v: idle Online=true host, on throughout (BMC sane), dropped from the inventory at %v, still held an hour later: OnConfirmed %v LastPoweredOn %v (a GuardTerm Hold refused inside its margin, same Term, makes each pass then a standby's, which counts LastPoweredOn as a power-on sent now)",
				period, dropped, h.Status.OnConfirmed, h.Status.LastPoweredOn)
		}
		t.Logf("refusal every %v: let go %v after the drop (OnConfirmed %v)", period, letGo-dropped, h.Status.OnConfirmed)
	}
}

// termGuard40bf is a GuardTerm safe for concurrent use: it leads unless
// refuse is set, in Term term.
type termGuard40bf struct {
	refuse atomic.Bool
	term   atomic.Uint64
}

func (g *termGuard40bf) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.refuse.Load() {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

func (g *termGuard40bf) Term() uint64 { return g.term.Load() }

// TestReview40bf_ConcurrentListingsAndPassesProbe: a Loop's HostLister
// listings and passes of several keys ask a GuardTerm at once while its
// Term changes and it refuses now and then (run it with -race: noteHold's
// r.term and r.leadAt, probe in withBusy). After the last Term change,
// with the Guard leading, every record is listed (othersMayLand's window
// reopened by the new Term). Coverage; passes.
func TestReview40bf_ConcurrentListingsAndPassesProbe(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOn})
	names := []string{"a", "b", "c", "d"}
	var hosts []reboot.Host
	for _, n := range names {
		hosts = append(hosts, reboot.Host{Name: n, Online: true})
	}
	store := fake.NewRebootHosts(hosts...)
	g := &termGuard40bf{}
	g.term.Store(1)
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: reboot.DefaultConfig(), Guard: g,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	l := rec.Loop(func(context.Context) ([]string, error) { return nil, nil })
	// Past the first window: nothing listed.
	if _, err := l.Keys(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	keys, err := l.Keys(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("setup: %v %v", keys, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if i%2 == 0 {
					_, _ = l.Keys(ctx)
				} else {
					_, _ = l.Reconcile(ctx, names[i])
				}
			}
		}(i)
	}
	for k := 0; k < 200; k++ {
		g.refuse.Store(k%7 == 3)
		if k%11 == 5 {
			g.term.Add(1)
		}
		clk.Advance(time.Second)
		time.Sleep(100 * time.Microsecond)
	}
	g.refuse.Store(false)
	close(stop)
	wg.Wait()
	clk.Advance(time.Hour)
	if keys, _ := l.Keys(ctx); len(keys) != 0 {
		t.Fatalf("an hour after the last change, with no new Term: listed %v", keys)
	}
	g.term.Add(1)
	keys, err = l.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(names) {
		t.Fatalf("a new Term while leading: the listing holds %v, not every record", keys)
	}
}

// TestReview40bf_MarginRefusalEveryFiveMinutesOfflineHostLetGo (coverage;
// passes): round 55's flapping Guard (flapGuard40be: a reboot.GuardTerm whose Term
// never changes, a Hold refused for 2 s every 5 min inside its margin, no
// other leader ever) and an Online=false host held off by this
// controller (OfflineSince, its power-off seen done: OfflineOffSeen), off
// on a sane BMC, dropped from the inventory. A pass run during a refusal
// is a standby's, and the success after it begins a "leadership"
// (noteHold: memory.lead); the record's power-off is this controller's
// own (known values), so it is not counted as another leader's call that
// may land. The host must be let go in bounded time, and is.
func TestReview40bf_MarginRefusalEveryFiveMinutesOfflineHostLetGo(t *testing.T) {
	for _, period := range []time.Duration{time.Hour, 5 * time.Minute} {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := reboot.DefaultConfig()
		pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
		off := clk.Now().Add(-time.Hour)
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false,
			Status: reboot.Status{OfflineSince: off, OfflineOffSeen: off.Add(time.Minute)}})
		clk.Advance(3 * time.Second) // out of the first refusal
		rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Guard: flapGuard40be{clk: clk, period: period},
			Power: func(string) (power.Controller, error) { return pw, nil }}
		listed := []string{"h"}
		l := rec.Loop(func(context.Context) ([]string, error) { return listed, nil })
		busy := true
		var dropped, letGo time.Duration
		for s := 0; s < 90*60; s++ {
			if s == 60 {
				listed = nil
				dropped = clk.Monotonic()
			}
			keys, err := l.Keys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inKeys := slices.Contains(keys, "h")
			if inKeys || busy {
				n, err := l.Reconcile(ctx, "h")
				if err == nil || n.Busy || n.Idle {
					busy = n.Busy
				}
			}
			if dropped > 0 && !inKeys && !busy && letGo == 0 {
				letGo = clk.Monotonic()
			}
			clk.Advance(time.Second)
		}
		if pw.HardwareOn() {
			t.Fatalf("setup: host on; truth %s", rebootcheck.DescribeTruth(pw))
		}
		if letGo == 0 {
			h, _ := store.Get(ctx, "h")
			t.Fatalf("refusal every %v: Online=false host held off (off throughout, BMC sane), dropped from the inventory at %v, still held 89 min later (status %+v): a GuardTerm Hold refused inside its margin, same Term, counts as a new leadership for the memory (lead)",
				period, dropped, h.Status)
		}
		t.Logf("refusal every %v: let go %v after the drop", period, letGo-dropped)
	}
}
