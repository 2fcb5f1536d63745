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

// Review 36 round 18 (TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn):
// 4c410ad counts, at a restart, a press a previous process may have sent
// only when Status.LastPress shows one ("every press writes it before it
// is sent"). That holds for presses sent by this version only: a status
// written by an earlier rebootkit has a pending reboot whose press it never
// recorded (LastPress exists since 7681302, 2026-11-25, and a pressing
// power-on writes it only since f82faae, round 16). A controller upgraded
// in place (a restart, or a rolling update's handover) reads such a
// status: before 4c410ad the pending reboot alone made it count a press
// that may land (noPress needed no reboot pending), so landWait held every
// power-off back LostLanding; now noPress is true (reconciler.go:453), the
// hard fence's ForceOff goes out at once on the still-running host, and the
// old process's lost soft press lands on the host that is off and powers
// it on while two keyed annotations hold it: the round-16 High again.
//
// The setup: a ButtonSoft BMC (iLO-like Redfish; every IPMI host: its
// TogglesOff(soft) is true); a keyed soft reboot; the first process's soft
// press times out and lands 170 s later (A5, within LostLanding = 180 s);
// the process dies; its status is as a version without LastPress (and
// without ActingSince) wrote it; the upgraded controller starts, and a
// second client asks for a hard fence.
//
// Fix (suggested): a status written by this version must say so (a field
// such as a status format version, written with every status): keep the
// old rule (a pending reboot or Online=false counts as a press that may
// land) for a status without it. LastPress and ActingSince alone cannot
// tell the two apart: the write before a decided ForceOff clears
// ActingSince, so TestReview36q_RestartPendingHardFenceWaitsLostLanding's
// status looks exactly like this one.
func TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn(t *testing.T) {
	ctx := context.Background()
	land := 170 * time.Second // within LostLanding (180 s) of the return (A5)
	w, pw := review36PressWorld(false)
	clk, store, newRec := w.clk, w.store, w.newRec
	rec := newRec()
	clk.Advance(time.Minute)
	for i := 0; i < 5; i++ { // settle: host on, idle
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.True(t, pw.HardwareOn())
	maint := &reboot.Client{Hosts: store, Key: "maint", Now: clk.Now}
	_, err := maint.Request(ctx, "h", power.ModeSoft)
	require.NoError(t, err)
	// The first process's soft press: its answer is lost, the BMC
	// carries it out land later.
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: land})
	lostAt := review36SendLost(t, clk, rec, reboot.ActionPowerOff, 2*time.Minute, nil)
	require.False(t, lostAt.IsZero(), "the setup: a soft press was sent")
	// The process dies. Its status, as a version before LastPress (and
	// ActingSince) wrote it: the pending reboot and nothing of its press.
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		require.True(t, h.Status.Pending(), "the setup: a reboot pending")
		h.Status.LastPress, h.Status.ActingSince = time.Time{}, time.Time{}
		h.Status.Format = 0 // nor its format (Status.Format, written since)
	}))
	clk.Advance(time.Second)
	rec = newRec() // the upgraded controller
	fence := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	_, err = fence.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	requestAt := clk.Real()
	review36RunAfterLost(t, clk, rec, lostAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.NotEmpty(t, rebootcheck.HeldBy(h), "the setup: still held")
	offAt, tc, on := review36OffThenOn(pw, requestAt, true)
	if on {
		t.Fatalf("the held host (hard fence %v after the lost press, upgraded controller) went off at %v and was powered on at %v (%v): the old process's lost soft press landed after the ForceOff; truth %s",
			requestAt.Sub(lostAt), offAt.Sub(lostAt), tc.At.Sub(lostAt), tc.Cause, rebootcheck.DescribeTruth(pw))
	}
	require.False(t, offAt.IsZero(), "the setup: the host went off; truth %s", rebootcheck.DescribeTruth(pw))
}

// Review 36 round 18 (TestReview36r_ClockCorrectionAfterPowerOnCyclesAgain),
// found by the round-17 follow kit (testdata/review36r): the wall clock
// runs 1 s ahead while a bare reboot is answered; its evidence
// (LastPoweredOff) is stamped on the ahead clock and the power-on is sent.
// The clock is corrected before a reading shows the host on (the reboot
// still pending): repair (decide.go:861-866) drops the evidence, and the
// same pass powers the host off again, a second power cycle for one
// request, right after the first power-on. A3 says such evidence is
// dropped, not that a reboot already powered on is done again (a
// dropped LastPoweredOff of a reboot whose LastPoweredOn is set could end
// it, or keep it answered without vouching for Fenced). Low: needs a clock
// jump (A3).
func TestReview36r_ClockCorrectionAfterPowerOnCyclesAgain(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	// A BMC whose readings are fresh (the kit's "tight" draw): StaleReads
	// 1 ms, OffSettle its early-Off bound.
	cfg.StaleReads, cfg.OffSettle = time.Millisecond, 100*time.Millisecond
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Report: fake.Report{EarlyOff: 100 * time.Millisecond}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	for i := 0; i < 3; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
	}
	clk.Jump(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ""}
	}))
	on := false
	for i := 0; i < 200 && !on; i++ {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		on = res.Decision.Power == reboot.ActionPowerOn
		if !on {
			clk.Advance(min(max(res.RequeueAfter, time.Millisecond), time.Second))
		}
	}
	require.True(t, on, "the setup: the reboot powered the host on")
	if testing.Verbose() {
		h, _ := store.Get(ctx, "h")
		t.Logf("real %v wall %v status %+v truth %s", clk.Real(), clk.Now(), h.Status, rebootcheck.DescribeTruth(pw))
	}
	clk.Correct()
	for i := 0; i < 100; i++ {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(min(max(res.RequeueAfter, time.Millisecond), time.Second))
	}
	offs := 0
	for _, tc := range pw.Truth() {
		if !tc.On {
			offs++
		}
	}
	require.Equal(t, 1, offs, "one bare request, but the host was powered off %d times; truth %s", offs, rebootcheck.DescribeTruth(pw))
}
