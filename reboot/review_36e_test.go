package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Review 36 round 5: doc.go says a controller with a Guard counts another
// leader's press "once it leads (the first Hold that succeeds after one
// refused, or after its start) as sent no earlier than that Hold". The fix
// applies it only to hosts read while standing by (memory.heard, lead). A
// host first read after the leadership began gets a fresh memory whose
// press counts from the Reconciler's start (mem: lastPress = r.start),
// and a LastPress stamped before the start's wall clock is not "late"
// (knownSinceStart): so the old leader's press, written before B's start
// and landing up to A's lease end, after it, counts from B's start. Here
// B starts (its first pass, of another host y, refused) 1 s after A wrote
// LastPress; A's press reaches the BMC 9 s later; B takes the lease at
// 15 s and reads h for the first time: it counts the press 9 s too early
// and presses the button of the held host on an echo.
func TestReview36e_LeaderCountsUnreadHostsPressFromItsStart(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	py := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true}, reboot.Host{Name: "y", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(n string) (power.Controller, error) {
			if n == "y" {
				return py, nil
			}
			return pw, nil
		}, Guard: &leaseGuard{l: lease, id: "b"}}
	lp := latePress{Power: pw}
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return lp, nil }, Guard: &leaseGuard{l: lease, id: "a"}}
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	// A writes LastPress and sends the press; B starts 1 s later (its
	// first pass, of y, is refused: standby); the press reaches the BMC
	// 10 s after the write, within A's lease (15 s).
	lp.before = func() {
		clk.Advance(time.Second)
		_, _ = rb.Reconcile(ctx, "y") // B's first pass: standby, nothing to do
		clk.Advance(9 * time.Second)
	}
	_, err = ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (LastPress persisted)")
	// A's lease ends 15 s after the request; B takes over and reads h for
	// the first time.
	clk.Advance(start.Add(15 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	for end := start.Add(6 * time.Minute); clk.Real().Before(end); {
		res, err := rb.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	if on := poweredOnByCommand(pw, start); !on.IsZero() {
		t.Fatalf("the new leader pressed the button of the held host (keyed annotation present) and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}
