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

// Review 36 round 6: fe263af made the Reconciler count another leader's
// press, power-off and power-on on a host it first reads after its
// leadership began from that leadership's start (r.leadAt), but not the
// Tracker, whose doc promises it fills every field as the Reconciler does
// ("so the two fill every field alike") and doc.go's "once it leads ... as
// sent no earlier than that Hold". A caller that follows Tracker's doc
// for a host it first handles after its process began to lead
// (NewTracker(processStart, wall) to count from its start, Standby before
// the first Observe, Leading after the pass's Hold) gets nothing from
// Leading (memory.lead only moves what standby passes heard, and none
// ran): the old leader's press, written before the process started and
// landing up to the old lease's end, counts from the process's start.
// Same world as TestReview36e_LeaderCountsUnreadHostsPressFromItsStart,
// with B deciding h through a Tracker: B presses the held host's button
// on an echo and powers it on.
func TestReview36f_TrackerCountsUnreadHostsPressFromProcessStart(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: cfg.SoftTimeout - time.Second,
		Report: fake.Report{Stale: cfg.StaleReads - time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
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
	// A writes LastPress and sends the press; process B starts 1 s later
	// (standing by); the press reaches the BMC 10 s after the write,
	// within A's lease.
	var bStart time.Duration
	var bStartWall time.Time
	lp.before = func() {
		clk.Advance(time.Second)
		bStart, bStartWall = clk.Monotonic(), clk.Now()
		clk.Advance(9 * time.Second)
	}
	_, err = ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (LastPress persisted)")
	// A's lease ends 15 s after the request; B takes it and handles h for
	// the first time, with a Tracker started at B's process start, as
	// Tracker's doc says: Standby before the first Observe, Leading after
	// the pass's Hold (every pass's Hold succeeds from now on).
	clk.Advance(start.Add(15 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	bg := &leaseGuard{l: lease, id: "b"}
	tr := reboot.NewTracker(bStart, bStartWall)
	tr.Standby()
	for end := start.Add(6 * time.Minute); clk.Real().Before(end); {
		_, cancel, err := bg.Hold(ctx)
		require.NoError(t, err)
		cancel()
		tr.Leading(clk.Monotonic())
		d, err := trackerPass(ctx, tr, cfg, store, pw, clk.Now, clk.Monotonic, "h")
		require.NoError(t, err)
		next := d.RequeueAfter
		if next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	if on := poweredOnByCommand(pw, start); !on.IsZero() {
		t.Fatalf("the new leader's Tracker pressed the button of the held host (keyed annotation present) and powered it on %v after the request; truth %s",
			on.Sub(start), rebootcheck.DescribeTruth(pw))
	}
}
