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

// Review 36 round 7: fe263af counts another leader's press on a host the
// Reconciler first reads after its leadership began from that leadership
// (r.leadAt), and 9747b24 does the same for a Tracker whose memory is
// unread at Leading, also after Tracker.Forget (Leading checks
// !mem.known). The Reconciler's Forget, though, installs a memory dated
// at the Forget (lastPress = m) that neither mem's leadAt base nor
// noteHold's lead (which only moves what standby passes heard) ever
// moves, and whose first pass ignores a foreign LastPress (first) and
// skips the start rules (forgot). Forget promises to drop what it knows
// "as a process restart would"; a process restarted at that instant
// counts from its leadership (TestReview36e_...). Same world as
// TestReview36e_LeaderCountsUnreadHostsPressFromItsStart, except that B,
// standing by, calls Forget("h") 1 s after A wrote LastPress (as its Loop
// does on a host it found NotFound) instead of passing over another host:
// B counts A's press from the Forget, 9 s before it reached the BMC, and
// presses the button of the held host on an echo, powering it on.
func TestReview36g_ForgetWhileStandingByCountsPressFromForget(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return pw, nil }, Guard: &leaseGuard{l: lease, id: "b"}}
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
	// A writes LastPress and sends the press; B (standing by) forgets h
	// 1 s later; the press reaches the BMC 10 s after the write, within
	// A's lease (15 s).
	lp.before = func() {
		clk.Advance(time.Second)
		rb.Forget("h")
		clk.Advance(9 * time.Second)
	}
	_, err = ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (LastPress persisted)")
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
		t.Fatalf("the new leader, which had forgotten h while standing by, pressed the button of the held host (keyed annotation present) and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}
