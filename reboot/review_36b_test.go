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

// Review 36 round 2: A2 says the controller powers a held host off again
// as soon as a read shows it on, and soft "falls back to hard after
// Config.SoftTimeout". A held host whose reboot was soft (the OS shut down
// in time, so Status.Mode stays soft) is powered on out of band and sits
// where the power button does nothing (firmware setup, a boot loader, an
// OS that ignores ACPI): heldOff sends a soft power-off every ReissueAfter
// for ever and never falls back to hard. The host runs, held by a keyed
// annotation, for as long as the test lasts (15 minutes), on a BMC that
// sets the power as on one whose soft power-off is a press.
func TestReview36_HoldBreakSoftNeverFallsBackToHard(t *testing.T) {
	for _, button := range []fake.ButtonKind{fake.ButtonNone, fake.ButtonSoft} {
		t.Run(button.String(), func(t *testing.T) {
			pc := fake.PowerConfig{Button: button, SoftDelay: 10 * time.Second, Lag: time.Second}
			w := newWorld(t, pc, reboot.Host{Online: true})
			c := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
			tk, err := c.Request(w.ctx, "h", power.ModeSoft)
			require.NoError(t, err)
			require.True(t, w.follow(t, 3*time.Minute, func() bool { f, _ := c.Fenced(w.ctx, tk); return f }), "fenced")
			w.follow(t, 5*time.Minute, func() bool { return false })
			require.False(t, w.pw.HardwareOn(), "held off")
			// Powered on out of band; it stops in the firmware, where the
			// power button is ignored.
			pc.IgnoreSoft = true
			w.pw.SetConfig(pc)
			w.pw.OutOfBandOn()
			at := w.clk.Real()
			w.follow(t, 15*time.Minute, func() bool { return false })
			bound := reboot.DefaultConfig().SoftTimeout + reboot.DefaultConfig().PollInterval + reboot.DefaultConfig().StaleReads
			if !w.pw.WasOffDuring(at.Add(time.Second), at.Add(bound)) {
				t.Fatalf("the held host (keyed annotation present) powered on out of band was not powered off within %v (SoftTimeout + PollInterval + StaleReads); still on after 15 min: %v; %d power calls; truth %s",
					bound, w.pw.HardwareOn(), len(w.pw.Calls()), rebootcheck.DescribeTruth(w.pw))
			}
		})
	}
}
