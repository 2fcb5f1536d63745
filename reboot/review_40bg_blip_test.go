package reboot_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// blipGuard40bg is a reboot.GuardTerm whose lease is held in one Term
// throughout but lapses on its own clock for 2 s every period: Hold is
// refused then and Term reads zero ("may not hold the leadership now"),
// after which a renewal sent before the lapse is answered and the same
// Term reads again. kube.LeaseGuard does this when a renewal sent before
// validUntil is answered after it (wrote keeps the term: sent <
// validUntil; Term is zero while now >= validUntil), and etcd's Guard
// when a keepalive confirms the same lease after its until passed
// (acting() fails meanwhile; Term = Rev again after). GuardTerm's doc: the
// same non-zero value at two moments only if the lease was held without a
// break, so that no other process may have led then.
type blipGuard40bg struct {
	clk    *fake.Clock
	period time.Duration
}

func (g blipGuard40bg) lapsed() bool { return g.clk.Monotonic()%g.period < 2*time.Second }

func (g blipGuard40bg) Term() uint64 {
	if g.lapsed() {
		return 0
	}
	return 7
}

func (g blipGuard40bg) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.lapsed() {
		return ctx, func() {}, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// TestReview40bg_SameTermAfterZeroBlipKeepsIdleUnlistedHostForEver: the
// only process leads throughout in one Term (7); every 5 min its Term
// reads zero for 2 s (a lapse on its own clock, the lease renewed in the
// same Term after). doc.go: the window in which every host is busy opens
// when the process begins to lead, "with a GuardTerm, only when its Term
// changed". noteHold stands by on the zero-Term refusal and begins a
// leadership at the next success although Term is the same (begin =
// !r.leading), so othersMayLand's window (9 min by default) reopens every
// 5 min and an idle Online=true host (sane BMC), dropped from the
// inventory, is never let go. Liveness with the fault on.
func TestReview40bg_SameTermAfterZeroBlipKeepsIdleUnlistedHostForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "x", Online: true})
	clk.Advance(3 * time.Second) // out of the first lapse
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Guard: blipGuard40bg{clk: clk, period: 5 * time.Minute},
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
		t.Fatalf("idle Online=true host (BMC sane, on throughout), dropped from the inventory at %v, still held 75 min later: the GuardTerm's Term read zero for 2 s every 5 min and then the same Term (7) again, yet each success reopens othersMayLand's %v window (doc.go: only when its Term changed)",
			dropped, reboot.LostLandingOf(cfg)+2*cfg.SoftTimeout+cfg.StaleReads)
	}
	t.Logf("let go %v after the drop", letGo-dropped)
}
