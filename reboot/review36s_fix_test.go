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

// TestReview36s_OverlapWithOldVersionCountsItsPendingRebootAsPress: the
// third place a status read counts a press (ownValues.foreign: a later pass
// of a controller with no Guard reads another writer's values). In a
// rolling update with no leader election the new version runs beside the
// old one for a while: the old one begins a soft reboot and presses the
// button (its answer lost, the press lands 170 s later, A5), writing, as
// an older Status has none, no LastPress and no Format, and stops. The new
// version's next pass reads the pending reboot it did not write: in a
// status of an older format it may hide a press (Status.Format), so a hard
// fence that comes next must wait for it to land before it cuts the
// power; otherwise the host goes off and the press powers the held host
// on.
func TestReview36s_OverlapWithOldVersionCountsItsPendingRebootAsPress(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	land := 170 * time.Second // within LostLanding (180 s) of the return (A5)
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	// a: the old version; b: the new one. No Guard: both act.
	ra := &reboot.Reconciler{Hosts: oldFormatStore{store}, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	clk.Advance(time.Minute)
	for i := 0; i < 5; i++ { // settle: host on, idle; b's first pass is behind it
		res, err := ra.Reconcile(ctx, "h")
		require.NoError(t, err)
		_, err = rb.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.True(t, pw.HardwareOn())
	maint := &reboot.Client{Hosts: store, Key: "maint", Now: clk.Now}
	_, err := maint.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: land})
	lostAt := review36SendLost(t, clk, ra, reboot.ActionPowerOff, 2*time.Minute, nil)
	require.False(t, lostAt.IsZero(), "the setup: a soft press was sent")
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Pending() && h.Status.LastPress.IsZero() && h.Status.Format == 0, "the setup: an old-format status %+v", h.Status)
	// The old version stops. The fence comes at once.
	clk.Advance(time.Second)
	fence := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	_, err = fence.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	requestAt := clk.Real()
	review36RunAfterLost(t, clk, rb, lostAt)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h), "the setup: still held")
	offAt, tc, on := review36OffThenOn(pw, requestAt, true)
	if on {
		t.Fatalf("the held host went off at %v and was powered on at %v (%v) by the old version's lost soft press; truth %s",
			offAt.Sub(lostAt), tc.At.Sub(lostAt), tc.Cause, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview36s_StampFormatRecordsOldPowerOnAsPress: the status an
// upgraded controller decides from an old-format status whose
// LastPoweredOn may hide a pressing power-on (OnToggles) records it as a
// LastPress, so that a restart after it is written (of StatusFormat, no
// longer hiding anything) still counts it; on a controller whose power-on
// does not press it records none. (A status only reformatted is not
// written for that alone: until a write, every restart reads the old
// format again and counts the press from its start.)
func TestReview36s_StampFormatRecordsOldPowerOnAsPress(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, onToggles := range []bool{true, false} {
		o := reboot.Observed{Online: true, Power: power.StateOn, OnToggles: onToggles,
			Status:   reboot.Status{LastPoweredOn: now.Add(-10 * time.Second)},
			QuietFor: time.Hour, SinceOff: time.Hour, SincePress: time.Hour}
		d := reboot.DefaultConfig().Decide(o, now)
		require.Equal(t, reboot.StatusFormat, d.Status.Format)
		require.Equal(t, onToggles, !d.Status.LastPress.IsZero(), "OnToggles %v: LastPress %v", onToggles, d.Status.LastPress)
	}
}
