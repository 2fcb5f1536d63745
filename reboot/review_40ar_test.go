package reboot_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40ar_OwedMarkerHidesOnlineFalseFromHostLister: 1d585a2 keeps
// the power-on owed in OfflineOffSeen alone (OfflineSince zero) with
// Online true, and makes idle's "held off" rule need OfflineSince too: the
// marker "holds nothing off". statusBusy (busy.go:60) was not changed to
// match: Online=false with OfflineOffSeen set still reads as "Online=false
// enforced and its power-off known done", whether or not OfflineSince is
// set. Setup as TestReview40aq_OnlineFalseAgainHostPoweredOnMeanwhileHeldAsOff:
// Online=false powers the host off (known done); Online=true while the
// BMC answers null (the marker is kept); the operator powers it on by
// hand (truth: on). The controller restarts; meanwhile the host leaves
// the inventory (Keys no longer lists it) and the operator sets it
// Online=false. Its stored record now shows an Online=false host not
// known off (no enforcement begun): a record without the stale marker
// is busy (statusBusy: !Online && OfflineOffSeen zero) and the HostLister
// adds it. With the marker, the new process's HostLister never lists it:
// the host runs on under Online=false for ever, its BMC healthy
// (ground truth: fake.Power on).
func TestReview40ar_OwedMarkerHidesOnlineFalseFromHostLister(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var null atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second})
	bmc := nullReads40aq{pw, &null}
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	start := clk.Real()
	loop40aq(t, rec, clk, start.Add(10*time.Minute), start)

	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, clk.Real().Add(3*time.Minute), start)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, !pw.HardwareOn() && !h.Status.OfflineOffSeen.IsZero(), "setup: off, known done; %+v", h.Status)

	null.Store(true)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	loop40aq(t, rec, clk, clk.Real().Add(time.Minute), start)
	pw.OutOfBandOn() // the operator, by hand
	loop40aq(t, rec, clk, clk.Real().Add(20*time.Second), start)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn() && h.Status.OfflineSince.IsZero() && !h.Status.OfflineOffSeen.IsZero(),
		"setup: host on by hand, the owed marker kept; %+v", h.Status)

	// The controller restarts. Meanwhile the host leaves the inventory
	// and the operator sets it Online=false; its BMC answers again.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	null.Store(false)
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return bmc, nil }}
	l := rec2.Loop(func(context.Context) ([]string, error) { return nil, nil })
	// The Runner, tick by tick: every listed key gets a pass.
	t2 := clk.Real()
	listed := false
	for clk.Real().Before(t2.Add(10 * time.Minute)) {
		keys, err := l.Keys(ctx)
		require.NoError(t, err)
		if slices.Contains(keys, "h") {
			listed = true
			_, _ = l.Reconcile(ctx, "h")
		}
		clk.Advance(time.Second)
	}
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, pw.HardwareOn(),
		"a running host set Online=false while unlisted (its record still carrying the power-on owed from an earlier Online=true, OfflineSince zero) is still on after 10 min with a healthy BMC (listed by the HostLister: %v; status %+v; truth %s): statusBusy reads the stale OfflineOffSeen as \"known off\"",
		listed, h.Status, rebootcheck.DescribeTruth(pw))
}

// TestReview40ar_ControlOnlineFalseUnlistedEnforced: the same restart with
// a record that never carried the marker (a running host, Online true,
// then Online=false while unlisted): the HostLister adds it and the
// new process powers it off. Passing coverage: the design that the
// owed marker breaks.
func TestReview40ar_ControlOnlineFalseUnlistedEnforced(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 10 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	loop40aq(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "setup: on")

	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	l := rec2.Loop(func(context.Context) ([]string, error) { return nil, nil })
	t2 := clk.Real()
	for clk.Real().Before(t2.Add(10 * time.Minute)) {
		keys, err := l.Keys(ctx)
		require.NoError(t, err)
		if slices.Contains(keys, "h") {
			_, _ = l.Reconcile(ctx, "h")
		}
		clk.Advance(time.Second)
	}
	require.False(t, pw.HardwareOn(), "control: an unlisted running host set Online=false is powered off; truth %s", rebootcheck.DescribeTruth(pw))
}

// TestReview40ar_OwedMarkerOnNeverOffHostHidesOnlineFalse: the same root
// cause with no hand on the power. Online=false; the soft power-off goes
// out and the OS ignores it (truth: on all along). A minute later the
// operator sets Online=true while the BMC's reads time out: owePowerOn
// sets OfflineOffSeen to OfflineSince (the power-off was never seen
// done) as the power-on owed. The controller restarts; the host has left
// the inventory and the operator sets it Online=false again; the BMC
// answers again. The record reads "Online=false, power-off known done"
// to statusBusy, so the HostLister never adds it: a host that was never
// powered off runs on under Online=false for ever.
func TestReview40ar_OwedMarkerOnNeverOffHostHidesOnlineFalse(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var readsDead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true, Faults: func(c fake.Call) fake.Fault {
		if readsDead.Load() && c.Op == fake.OpState {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	loop40aq(t, rec, clk, start.Add(10*time.Minute), start)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, clk.Real().Add(time.Minute), start)
	readsDead.Store(true)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	loop40aq(t, rec, clk, clk.Real().Add(10*time.Minute), start)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn() && h.Status.OfflineSince.IsZero() && !h.Status.OfflineOffSeen.IsZero(),
		"setup: host never off, the owed marker set; %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))

	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	readsDead.Store(false)
	rec2 := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	l := rec2.Loop(func(context.Context) ([]string, error) { return nil, nil })
	t2 := clk.Real()
	listed := false
	for clk.Real().Before(t2.Add(10 * time.Minute)) {
		keys, err := l.Keys(ctx)
		require.NoError(t, err)
		if slices.Contains(keys, "h") {
			listed = true
			_, _ = l.Reconcile(ctx, "h")
		}
		clk.Advance(time.Second)
	}
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, pw.HardwareOn(),
		"a host never powered off (soft ignored), Online=true while its reads failed, then Online=false while unlisted across a restart, is still on after 10 min with a healthy BMC (listed by the HostLister: %v; status %+v; truth %s): the owed marker reads as \"power-off known done\" to statusBusy",
		listed, h.Status, rebootcheck.DescribeTruth(pw))
}
