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

// Review 36 round 2: A4 and the package doc run one Runner per process
// and fence the Reconcilers by a Guard that is asked "never for reads":
// a standby process runs passes too. Its Reconciler decides in its first
// pass of a host, from the status read then, that no power-off and no
// press of a previous process can be in effect (memory.sinceOff: noOff,
// noPress), and never revisits that. Standby B reads the idle host; leader
// A then presses the power button for a keyed soft request (LastPress is
// persisted) and loses its lease while the OS shuts down; B takes over
// with SinceOff = SincePress = "never": its first On reading, a 20 s
// stale echo from before the shutdown ended, gets a press that powers the
// held host on.
func TestReview36_StandbyMemoryIgnoresOtherLeadersPress(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second, Lag: time.Second,
		Report: fake.Report{Stale: 20 * time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	pc := func(string) (power.Controller, error) { return pw, nil }
	ra := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "a"}}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Power: pc, Guard: &leaseGuard{l: lease, id: "b"}}
	// Both processes run their loops; the host is idle and on.
	_, err := ra.Reconcile(ctx, "h")
	require.NoError(t, err)
	_, _ = rb.Reconcile(ctx, "h") // standby: reads only
	clk.Advance(5 * time.Minute)

	client := &reboot.Client{Hosts: store, Key: "fencing", Now: clk.Now}
	_, err = client.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	start := clk.Real()
	// Leader A presses the button and runs for 30 s, then is paused
	// (its lease runs out); the OS is still shutting down.
	for clk.Real().Before(start.Add(30 * time.Second)) {
		res, err := ra.Reconcile(ctx, "h")
		require.NoError(t, err)
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = 10 * time.Millisecond
		}
		clk.Advance(next)
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPress.IsZero(), "A pressed the button (persisted in LastPress)")
	// A's lease ends; B takes over 50 s after the request (the host went
	// off at 46 s; reads show the state of 20 s ago).
	clk.Advance(start.Add(50 * time.Second).Sub(clk.Real()))
	lease.give("b", time.Hour)
	for end := start.Add(5 * time.Minute); clk.Real().Before(end); {
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
