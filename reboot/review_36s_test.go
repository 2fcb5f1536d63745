package reboot_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// Review 36 round 19 (TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn):
// Status.Format (1f64f92) exists because a status written before every
// press was recorded in LastPress may hide a press: "before every press
// was recorded in LastPress (power-offs and pressing power-ons)"
// (decide.go:108-115). But the old rule it restores only counts a pending
// reboot or an Online=false enforcement as a hidden press
// (reconciler.go:456: noPress := LastPress.IsZero() && (Format >= 1 ||
// noOff); stampFormat, decide.go:653, likewise). A pressing power-on (an
// OnToggler: Redfish with PushPowerButton only, fake.ButtonAll) ends the
// reboot: its write clears PendingRebootSince, so a status an older
// version wrote right after such a power-on (LastPress written for a
// pressing power-on only since round 16) shows no pending reboot, no
// OfflineSince, no LastPress and Format 0: the upgraded controller counts
// no press a previous process may have sent. The old process's power-on
// press whose answer was lost then lands (A5, within LostLanding) after
// the upgraded controller pressed the host off for a keyed request, and
// powers the held host on: TestReview36p_RestartForgetsLostPowerOnPress
// again, across an upgrade.
// Fix (suggested): in a status of an older format, a LastPoweredOn (the
// old power-on's write) on a controller whose power-on may press counts
// as a press a previous process may have sent too (noPress false when
// Format < StatusFormat and LastPoweredOn is set and OnToggles), and
// stampFormat records it as LastPress.
func TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn(t *testing.T) {
	ctx := context.Background()
	land := 170 * time.Second // within LostLanding (180 s) of the return (A5)
	w, pw := review36PressWorld(true)
	clk, store, newRec := w.clk, w.store, w.newRec
	clk.Advance(time.Minute)
	// The old process's power-on: its answer is lost; the BMC carries it
	// out later.
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: land})
	rec := newRec()
	lostAt := review36SendLost(t, clk, rec, reboot.ActionPowerOn, 2*time.Minute, nil)
	require.False(t, lostAt.IsZero(), "the setup: a power-on was sent")
	// The process dies. Its status, as a version before a pressing
	// power-on wrote LastPress (and before ActingSince and Format) wrote it.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		require.False(t, h.Status.Pending(), "the setup: the power-on ended the reboot")
		require.False(t, h.Status.LastPoweredOn.IsZero(), "the setup: the power-on was recorded")
		h.Status.LastPress, h.Status.ActingSince = time.Time{}, time.Time{}
		h.Status.Format = 0
	}))
	clk.Advance(time.Second)
	rec = newRec() // the upgraded controller
	requested, requestAt := review36RequestBeforeLanding(t, clk, store, rec, pw, lostAt, land)
	if !requested {
		review36NoOnPressBeforeLanding(t, pw, lostAt, land)
		return
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h))
	offAt, tc, on := review36OffThenOn(pw, requestAt, false)
	if on {
		t.Fatalf("the held host (keyed annotation at %v after the lost power-on) went off at %v and was powered on at %v (%v): the old process's lost power-on press landed after the upgrade; truth %s",
			requestAt.Sub(lostAt), offAt.Sub(lostAt), tc.At.Sub(lostAt), tc.Cause, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}

// oldFormatStore is the store as an older rebootkit writes it: every
// status it writes has no LastPress, no ActingSince and no Format (an
// older Status struct has none of them to write).
type oldFormatStore struct{ reboot.HostStore }

func (s oldFormatStore) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	h.Status.LastPress, h.Status.ActingSince, h.Status.Format = time.Time{}, time.Time{}, 0
	return s.HostStore.Update(ctx, h)
}

// Review 36 round 19 (TestReview36s_RollingUpgradeHandoverPowersHeldHostOn):
// round 18 named both ways a controller is upgraded in place, "a restart,
// or a rolling update's handover"; 1f64f92 keeps the old rule for a status
// of an older format only in the host's first pass after a start
// (reconciler.go:456). A standby of the new version that reads the old
// leader's status in later passes counts a press only from a LastPress
// (reconciler.go:489: press = !st.LastPress.IsZero(); likewise the
// checkActing path, reconciler.go:482, and ownValues.foreign, tracker.go:519): the old
// leader's pending soft reboot, whose press it never recorded, counts as a
// power-off, not as a press. Once the new version leads, a hard fence's
// ForceOff goes out at once (landWait sees no press), the host goes off,
// and the old leader's soft press whose answer was lost lands (A5, 170 s
// after it returned, within LostLanding) and powers the held host on:
// TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn through a
// handover instead of a restart.
// Fix (suggested): apply the Format rule wherever a status read counts a
// press (standby, checkActing, foreign): in a status of Format <
// StatusFormat a pending reboot or OfflineSince counts as a press (a
// LastPress) too.
func TestReview36s_RollingUpgradeHandoverPowersHeldHostOn(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	land := 170 * time.Second // within LostLanding (180 s) of the return (A5)
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft, SoftDelay: 45 * time.Second,
		Report: fake.Report{Stale: time.Second, NoTransitioning: true}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	// a: the old version's leader; b: the new version, standing by.
	ra := &reboot.Reconciler{Hosts: oldFormatStore{store}, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }, Guard: &leaseGuard{l: lease, id: "a"}}
	rb := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }, Guard: &leaseGuard{l: lease, id: "b"}}
	clk.Advance(time.Minute)
	for i := 0; i < 5; i++ { // settle: host on, idle
		res, err := ra.Reconcile(ctx, "h")
		require.NoError(t, err)
		_, _ = rb.Reconcile(ctx, "h") // standby: reads only
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.True(t, pw.HardwareOn())
	maint := &reboot.Client{Hosts: store, Key: "maint", Now: clk.Now}
	_, err := maint.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	// The old leader's soft press: its answer is lost, the BMC carries it
	// out land later.
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: land})
	lostAt := review36SendLost(t, clk, ra, reboot.ActionPowerOff, 2*time.Minute, func() { _, _ = rb.Reconcile(ctx, "h") })
	require.False(t, lostAt.IsZero(), "the setup: a soft press was sent")
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Pending() && h.Status.LastPress.IsZero() && h.Status.Format == 0, "the setup: an old-format status %+v", h.Status)
	// The rolling update stops the old leader; the new one leads 15 s
	// later (its standby passes go on meanwhile).
	for i := 0; i < 15; i++ {
		clk.Advance(time.Second)
		_, _ = rb.Reconcile(ctx, "h")
	}
	lease.give("b", time.Hour)
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
		t.Fatalf("the held host (two keyed annotations) went off at %v and was powered on at %v (%v) by the old leader's lost soft press, after the new version took over; truth %s",
			offAt.Sub(lostAt), tc.At.Sub(lostAt), tc.Cause, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}

// recordTB records what a kit reports instead of failing the test.
type recordTB struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recordTB) note(s string)             { r.mu.Lock(); r.failed = append(r.failed, s); r.mu.Unlock() }
func (r *recordTB) Errorf(f string, a ...any) { r.note(fmt.Sprintf(f, a...)) }
func (r *recordTB) Error(a ...any)            { r.note(fmt.Sprint(a...)) }
func (r *recordTB) Fatalf(f string, a ...any) { r.note(fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recordTB) Fatal(a ...any)            { r.note(fmt.Sprint(a...)); runtime.Goexit() }
func (r *recordTB) Fail()                     { r.note("Fail") }
func (r *recordTB) FailNow()                  { r.note("FailNow"); runtime.Goexit() }
func (r *recordTB) Failed() bool              { r.mu.Lock(); defer r.mu.Unlock(); return len(r.failed) > 0 }

// Review 36 round 19 (TestReview36s_KitContractAcceptsStoreDroppingPressFields):
// the restart rule now rests on fields a HostStore must persist: a zero
// Status.LastPress means "no press may still land" in a status whose
// Format is StatusFormat (reconciler.go:456), and Status.ActingSince
// bounds when a previous process's calls returned. The conformance kit's
// Contract checks that Update "writes annotations and status together"
// with one field only (PendingRebootSince, reboottest/contract.go:51-62):
// a store of your own that keeps the Status in fields of its own and
// drops LastPress, ActingSince and Format (one written for an earlier
// Status, or one that lists the fields it stores) passes it, and the
// state machines cannot see what it loses: their held-host check excuses
// every power-on of the hardware within LostLanding of an OpOn call
// (reboottest/statemachine.go:346-350), which is exactly how a lost
// power-on press that a restart forgot lands on a held host
// (TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn: with such
// a store, every restart is that upgrade).
// Fix (suggested): Contract writes a Status with every field set (and
// Format) and checks it reads back Equal, through both handles.
func TestReview36s_KitContractAcceptsStoreDroppingPressFields(t *testing.T) {
	rec := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reboottest.Contract(rec, func(h reboot.Host) (reboottest.Stores, error) {
			s := fake.NewRebootHosts(h)
			return reboottest.Stores{Hosts: oldFormatStore{s}, Other: s}, nil
		})
	}()
	<-done
	if !rec.Failed() {
		t.Fatalf("the conformance kit's Contract passed a HostStore that drops Status.LastPress, ActingSince and Format on every write: a restart then counts no press a previous process sent")
	}
}
