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

// TestRestartFindsPreviousProcessLostPowerOffAfterWipe (round 54, the
// High TestReview40bd_ModelNewSeedLostCallLandsAfterRecreateOnlineLetGo
// without a Guard): a process sends the soft power-off for Online=false;
// its answer is lost (the call lands 140 s later). The process dies, the
// record is wiped and set Online=true (nothing in it says a power-off
// was sent), and a new process starts, with the host dropped from the
// inventory either before its start (found only by the HostLister) or
// after its first passes. The new process must keep the host until the
// lost call may no longer land and its shutdown run (LostLanding + 2x
// SoftTimeout + StaleReads after its start), so that it powers the host
// on again when the call lands; then let it go. Ground truth: fake.Power.
// On the old rule the new process let the clean Online=true record go at
// once and the host stayed off for good.
func TestRestartFindsPreviousProcessLostPowerOffAfterWipe(t *testing.T) {
	for _, tc := range []struct {
		name         string
		listedPasses int // passes of the new process with the host listed
	}{
		{"unlisted at start", 0},
		{"dropped after the start", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			for range 5 {
				_, _ = rec.Reconcile(ctx, "h")
				clk.Advance(time.Second)
			}
			mu.Lock()
			loseNextOff = true
			mu.Unlock()
			if err := store.Mutate("h", func(h *reboot.Host) { h.Online = false }); err != nil {
				t.Fatal(err)
			}
			sent := false
			for range 120 {
				res, _ := rec.Reconcile(ctx, "h")
				clk.Advance(time.Second)
				if res.Decision.Power == reboot.ActionPowerOff {
					sent = true
					break
				}
			}
			if !sent || !pw.HardwareOn() {
				t.Fatalf("setup: a lost power-off, the host still on; truth %s", rebootcheck.DescribeTruth(pw))
			}
			// The process dies; the record is wiped and handed back.
			if err := store.Mutate("h", func(h *reboot.Host) { h.Online, h.Status, h.Annotations = true, reboot.Status{}, nil }); err != nil {
				t.Fatal(err)
			}
			wiped := clk.Real()
			clk.Advance(5 * time.Second)
			rec2 := newRec()
			passes := 0
			l := rec2.Loop(func(context.Context) ([]string, error) {
				if passes < tc.listedPasses {
					return []string{"h"}, nil
				}
				return nil, nil
			})
			held := true // a key the Runner holds counts as busy until its first pass tells
			var letGo time.Time
			for end := clk.Real().Add(20 * time.Minute); clk.Real().Before(end); clk.Advance(time.Second) {
				keys, err := l.Keys(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(keys, "h") && !held {
					if letGo.IsZero() {
						letGo = clk.Real()
					}
					continue
				}
				n, err := l.Reconcile(ctx, "h")
				passes++
				if err == nil || n.Busy || n.Idle {
					held = n.Busy
				}
				if !letGo.IsZero() {
					t.Fatalf("let go at %v and reconciled again at %v", letGo, clk.Real())
				}
			}
			landed := false
			for _, c := range pw.Truth() {
				landed = landed || !c.On && c.At.After(wiped)
			}
			if !landed {
				t.Fatalf("setup: the lost power-off never landed after the wipe; truth %s", rebootcheck.DescribeTruth(pw))
			}
			if !pw.HardwareOn() {
				t.Fatalf("Online=true host left off: the previous process's lost power-off landed after the new one let the host go (at %v); truth %s",
					letGo, rebootcheck.DescribeTruth(pw))
			}
			if letGo.IsZero() {
				t.Fatalf("never let go in 20 min (window %v)", reboot.LostLandingOf(cfg)+2*cfg.SoftTimeout+cfg.StaleReads)
			}
		})
	}
}

// termGuard leads throughout; its Term is *term, and it refuses while
// *refuse is set.
type termGuard struct{ term, refuse *int }

func (g termGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if *g.refuse != 0 {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

func (g termGuard) Term() uint64 { return uint64(*g.term) }

// TestGuardTermDecidesWhetherOthersWindowReopens: an idle Online host with
// a sane BMC, dropped from the inventory at 30 min, under a GuardTerm that
// leads throughout. A refusal inside the margin (the Term unchanged) does
// not reopen othersMayLand's window: the host is let go at once. A new
// Term, seen while leading with no refusal in between (the lease lapsed
// and was taken again between two passes), or after a refusal, reopens
// it: the host is held for the window after that Hold.
func TestGuardTermDecidesWhetherOthersWindowReopens(t *testing.T) {
	cfg := reboot.DefaultConfig()
	window := reboot.LostLandingOf(cfg) + 2*cfg.SoftTimeout + cfg.StaleReads
	for _, tc := range []struct {
		name      string
		refuse    bool // refused for 2 s at 29 min
		newTerm   bool // the Term changes at 29 min
		heldUntil time.Duration
	}{
		{"refusal, same term", true, false, 0},
		{"new term, no refusal", false, true, 29*time.Minute + window},
		{"refusal and new term", true, true, 29*time.Minute + window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			pw := fake.NewPower(clk.Real, fake.PowerConfig{})
			store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
			term, refuse := 1, 0
			rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
				Guard: termGuard{term: &term, refuse: &refuse},
				Power: func(string) (power.Controller, error) { return pw, nil }}
			listed := []string{"h"}
			l := rec.Loop(func(context.Context) ([]string, error) { return listed, nil })
			held := true
			var letGo time.Duration
			for s := 0; s < 60*60; s++ {
				at := time.Duration(s) * time.Second
				switch at {
				case 29 * time.Minute:
					if tc.refuse {
						refuse = 1
					}
					if tc.newTerm {
						term = 2
					}
				case 29*time.Minute + 2*time.Second:
					refuse = 0
				case 30 * time.Minute:
					listed = nil
				}
				keys, err := l.Keys(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(keys, "h") || held {
					if letGo > 0 {
						t.Fatalf("let go at %v, reconciled again at %v", letGo, at)
					}
					n, err := l.Reconcile(ctx, "h")
					if err == nil || n.Busy || n.Idle {
						held = n.Busy
					}
				} else if letGo == 0 && at >= 30*time.Minute {
					letGo = at
				}
				clk.Advance(time.Second)
			}
			if !pw.HardwareOn() {
				t.Fatalf("setup: off; truth %s", rebootcheck.DescribeTruth(pw))
			}
			want := max(tc.heldUntil, 30*time.Minute)
			if letGo < want || letGo > want+10*time.Second {
				t.Fatalf("let go at %v, want within 10 s after %v", letGo, want)
			}
		})
	}
}
