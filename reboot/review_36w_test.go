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

// Review 36 round 23 (TestReview36w_OfflineOffHostFlappingNullForceOffForEver):
// round 22 made the Online=false enforcement end only when Online
// becomes true (7f57396, point 4), and repeated an accepted hard
// power-off every ReissueAfter on any reading but Off (d7bc99f, point 3,
// dropping cbfa294's "power-off accepted ... wait" branch). Together: a
// host that is off (ground truth: off all along) with Online=false, whose
// BMC answers null on half its reads (issue 36 point 4's BMC), gets one
// enforcement (Works stays 1, which is all
// TestReview36v_OfflineOffHostFlappingNullChurnsStatus checks), whose
// soft power-off times out into hard, and then a ForceOff on the first
// null reading every ReissueAfter, for ever, each with Status writes
// (ActingSince cleared by the decided call and written again after it):
// about 55 power-offs and 110 writes an hour for an off host, where
// before round 22 an Off reading ended the enforcement and an accepted
// power-off was not repeated on null. An Off reading that cannot echo
// (QuietFor, OffFor past StaleReads after the power-off) shows the
// enforcement's power-off carried out: the pending path stops there
// (heldOff sends nothing on an unknown reading of a held host).
func TestReview36w_OfflineOffHostFlappingNullForceOffForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff, Report: fake.Report{Unknown: 0.5, Seed: 7}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	at := clk.Real()
	// The first half hour: the enforcement begins and settles.
	half := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, half, at)
	offs0, writes0 := 0, store.Updates()
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff {
			offs0++
		}
	}
	end := half.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, end) && !pw.WasOnAt(end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	offs := 0
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff {
			offs++
		}
	}
	writes := store.Updates() - writes0
	require.LessOrEqual(t, offs-offs0, 2,
		"an off host (ground truth: off all along) with Online=false, BMC answering null on half its reads, was sent %d power-offs (%d Status writes) in the hour after its enforcement settled (Works %d): the accepted hard power-off is repeated every ReissueAfter on null for ever",
		offs-offs0, writes, h.Status.Works)
	require.LessOrEqual(t, writes, 4, "Status writes in an hour for an off host held off by Online=false: %d", writes)
}

// Review 36 round 23 (TestReview36w_StuckTransitioningFenceNeverSentAcrossRestarts):
// a57d11e's poweringOn (decide.go) waits on a Transitioning reading while
// QuietFor < SoftTimeout + StaleReads and the last call is not a
// power-off. QuietFor counts from the controller's start when it sent no
// power-on since (tracker.go quietFor), and Observed.LastCall is zero
// after a restart, so every restart puts a pending reboot on a BMC stuck
// reading Transitioning while the host runs (round 21's BMC,
// TestReview36u_StuckTransitioningHardRebootNeverSent) on hold for
// SoftTimeout + StaleReads (210 s) whatever its mode, a hard keyed fence
// included, though nothing of this controller's is powering on: a
// controller restarted every 3 minutes (a crash loop, a rolling upgrade,
// OOM kills) never sends the fence's ForceOff. The wait is meant for a
// soft power-off that POST would not hear; a forced power-off is heard
// whatever the host does, and a restart is not a power-on.
func TestReview36w_StuckTransitioningFenceNeverSentAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return stuckTransitioning{pw}, nil }}
	}
	rec := newRec()
	// The controller has run for long before the request; the host runs.
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	// The controller restarts at the request, and every 3 minutes.
	restartAt := requestAt
	end := requestAt.Add(30 * time.Minute)
	restarts := 0
	for clk.Real().Before(end) {
		if !clk.Real().Before(restartAt) {
			rec, restarts, restartAt = newRec(), restarts+1, clk.Real().Add(3*time.Minute)
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && (res.Decision.Power != reboot.ActionNone || res.Decision.Reason != "") {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(requestAt), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(max(min(next, 30*time.Second, restartAt.Sub(clk.Real())), time.Millisecond))
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, requestAt.Add(5*time.Minute)),
		"a hard keyed fence of a running host whose BMC (no button) reads Transitioning while it runs, the controller restarted every 3 minutes (%d restarts): no power-off within 5 min (at all in 30 min: %v): every restart waits SoftTimeout + StaleReads on the Transitioning reading as a power-on of its own; status %+v; truth %s",
		restarts, pw.WasOffDuring(requestAt, end), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_SoftRebootAfterOfflineSoftOffNeverSent):
// wait (decide.go, "soft power-off under way: wait") holds a soft
// power-off for ever on any reading but On once the last call was an
// accepted soft power-off, whatever work it was decided for (only a
// failed one of another work is skipped). Online=false is set on a host
// whose BMC answers null while it runs (issue 36 point 4's BMC) and
// whose OS ignores the ACPI power button: the enforcement's soft
// power-off is accepted and does nothing; Online is set back true before
// its hard fallback (the enforcement ends). A soft reboot then asked is
// never carried out: its soft power-off is never sent (the enforcement's
// stands in for it), so SoftSince is never stamped and softTimedOut
// never falls back to hard (a BMC that does not press); the
// poweringOn/sentOff checks round 22 added do not reach it (the last call
// is a power-off, the reading unknown). The reboot's own soft power-off
// and its SoftTimeout fallback would end it.
func TestReview36w_SoftRebootAfterOfflineSoftOffNeverSent(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return nullWhileOn{pw}, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	offAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, offAt.Add(time.Minute), offAt)
	require.False(t, pw.WasOffDuring(offAt, clk.Real()), "the setup: the OS ignores the soft power-off")
	softOffs := 0
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && c.Mode == power.ModeSoft {
			softOffs++
		}
	}
	require.Equal(t, 1, softOffs, "the setup: the enforcement's soft power-off was sent")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), offAt)
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: ""}
	}))
	end := requestAt.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, requestAt.Add(cfg.SoftTimeout+cfg.ReissueAfter+time.Minute)),
		"a soft reboot of a host whose BMC answers null while it runs, asked after an Online=false enforcement's soft power-off was accepted (and ignored by the OS) and Online set back true: not carried out within SoftTimeout + ReissueAfter + 1 min (at all in 30 min: %v); status %+v; calls %+v; truth %s",
		pw.WasOffDuring(requestAt, end), h.Status, pw.Calls(), rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_OfflineAgainAfterSoftOffNeverPowersOff):
// the same wait (decide.go, "soft power-off under way: wait") in idle:
// Online=false is set, its soft power-off accepted and ignored by the OS
// (the BMC answers null while the host runs); Online is set back true
// before the hard fallback, then false again. The second enforcement
// (OfflineSince, Works new) never sends a power-off: wait takes the first
// enforcement's accepted soft power-off for its own, OfflineSoftSince
// stays the first one's (softSent false), so softTimedOut never falls
// back to hard on a BMC that does not press, and the host runs for ever
// with Online=false. Round 22's "repeat an accepted hard power-off every
// ReissueAfter" (d7bc99f) is never reached: nothing hard is ever sent.
func TestReview36w_OfflineAgainAfterSoftOffNeverPowersOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{IgnoreSoft: true})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return nullWhileOn{pw}, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, first.Add(time.Minute), first)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), first)
	require.False(t, pw.WasOffDuring(first, clk.Real()), "the setup: the OS ignores the soft power-off")
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, at.Add(cfg.SoftTimeout+cfg.ReissueAfter+time.Minute)),
		"Online=false set again on a host whose BMC answers null while it runs, after an earlier enforcement's soft power-off was accepted (ignored by the OS) and Online set back true: not powered off within SoftTimeout + ReissueAfter + 1 min (at all in 30 min: %v); status %+v; calls %+v; truth %s",
		pw.WasOffDuring(at, end), h.Status, pw.Calls(), rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_HeldHostOnStuckTransitioningNeverPoweredOff):
// heldOff (decide.go, "off; power changing: look again") answers every
// Transitioning reading of a held host with a look again, for ever. A
// keyed fence is carried out (ForceOff, Off readings, evidence covers
// it); someone else then powers the held host on, and its BMC (no
// button, round 21's stuck BMC) reads Transitioning while the host runs.
// The held host runs for ever while the keyed annotation holds it, and
// HoldBroken is never recorded, though heldOff powers a held host off
// hard "at once" on an On reading, and doc.go says a power-off that sets
// the power is sent whatever the reading (round 21 fixed the same wait
// in pending: TestReview36u_StuckTransitioningHardRebootNeverSent).
func TestReview36w_HeldHostOnStuckTransitioningNeverPoweredOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckTransitioning{pw}, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, requestAt.Add(5*time.Minute), requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers(), "the setup: the fence was carried out; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(), "the setup: the host is held off")
	pw.OutOfBandOn()
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fence", "the setup: still held")
	require.True(t, pw.WasOffDuring(at.Add(time.Second), at.Add(5*time.Minute)),
		"a held host (keyed fence carried out) powered on by someone else, its BMC (no button) reading Transitioning while it runs: not powered off again within 5 min (at all in 30 min: %v); status %+v; truth %s",
		pw.WasOffDuring(at.Add(time.Second), end), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_HeldHostOnNullNeverPoweredOff): the
// same with issue 36 point 4's BMC, which answers null while the host
// runs: heldOff (decide.go, "case power.StateUnknown" falls through to
// "off; held ...") sends nothing on an unknown reading of a held host.
func TestReview36w_HeldHostOnNullNeverPoweredOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return nullWhileOn{pw}, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, requestAt.Add(5*time.Minute), requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers(), "the setup: the fence was carried out; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(), "the setup: the host is held off")
	pw.OutOfBandOn()
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fence", "the setup: still held")
	require.True(t, pw.WasOffDuring(at.Add(time.Second), at.Add(5*time.Minute)),
		"a held host (keyed fence carried out) powered on by someone else, its BMC (no button) answering null while it runs: not powered off again within 5 min (at all in 30 min: %v); status %+v; truth %s",
		pw.WasOffDuring(at.Add(time.Second), end), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce):
// 7f57396 (round 22 point 4) ends the Online=false enforcement only when
// Online becomes true, so its OfflineMode, hard SoftTimeout after its
// soft power-off, stays hard for as long as Online stays false. A host
// whose OS honours the soft power-off goes off (well within SoftTimeout,
// but the fallback fires on the next non-Off reading after it: here
// none), sits off for hours, and is then powered on by someone else (an
// operator at the BMC, a power restore policy): its OS is cut hard on the
// first On reading, with no soft power-off at all, where before round 22
// a fresh Off reading ended the enforcement and the new one tried soft
// first, SoftTimeout long. Status's doc: "soft at first, hard
// SoftTimeout after its first soft power-off".
func TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, first.Add(2*time.Hour), first)
	require.True(t, pw.WasOffDuring(first, first.Add(time.Minute)) && !pw.HardwareOn(), "the setup: the OS shut down on the soft power-off")
	for _, c := range pw.Calls() {
		require.False(t, c.Op == fake.OpOff && c.Mode == power.ModeHard, "the setup: no hard power-off yet")
	}
	pw.OutOfBandOn()
	at := clk.Real()
	end := at.Add(10 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at.Add(time.Second), end), "the setup: powered off again; truth %s", rebootcheck.DescribeTruth(pw))
	for _, c := range pw.Calls() {
		if c.Op == fake.OpOff && !c.At.Before(at) {
			require.Equal(t, power.ModeSoft, c.Mode,
				"a host held off by Online=false for 2 h (its OS shut down on the soft power-off), then powered on by someone else: its first power-off (at +%v) was hard, no soft power-off tried; status %+v; truth %s",
				c.At.Sub(at), h.Status, rebootcheck.DescribeTruth(pw))
			break
		}
	}
}

// stuckPoweringOff is a BMC whose PowerState is stuck at a transitional
// value (Redfish "PoweringOff" left behind by a firmware bug) once the
// hardware is off; it reads On while the host runs. Its power calls set
// the power (no button): a power-on powers nothing off.
type stuckPoweringOff struct{ *fake.Power }

func (s stuckPoweringOff) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil && st == power.StateOff {
		return power.StateTransitioning, nil
	}
	return st, err
}

// Review 36 round 23 (TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver):
// idle (decide.go, "power state transitioning: wait") answers every
// Transitioning reading with Online=true by a wait, for ever. Online=false
// is enforced (the host goes off: ground truth), its BMC (no button)
// then reads Transitioning for ever, the mirror of round 21's stuck BMC;
// Online is set back true: the host stays off for good, though a
// power-on of a BMC whose power-on does not press (OnToggles false)
// powers nothing off, and round 21 let a power-off that sets the power
// go out on the same readings (TestReview36u_StuckTransitioningHardRebootNeverSent).
func TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckPoweringOff{pw}, nil }}
	for i := 0; i < 10; i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Minute)
	}
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, first.Add(10*time.Minute), first)
	require.False(t, pw.HardwareOn(), "the setup: Online=false powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online set back true on a host powered off by Online=false, its BMC (no button, power-on does not press) reading Transitioning while it is off: still off 30 min later; status %+v; truth %s",
		h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 23 (TestReview36w_HardFenceAfterPowerOnWaitsForPOST):
// poweringOn (decide.go) holds every power-off of a pending reboot,
// whatever its mode, for up to SoftTimeout + StaleReads after the
// controller's power-on while the BMC reads Transitioning. The wait is
// for a soft power-off that POST would not hear (a57d11e); a hard one
// (ForceOff) is heard whatever the host does and powers nothing on. On
// round 21's BMC (no button, stuck reading Transitioning while the host
// runs), a hard keyed fence asked 30 s after the controller powered the
// host on goes out 180 s later (a fencing client waits 3 minutes more),
// where TestReview36u_StuckTransitioningHardRebootNeverSent asks for it
// within a minute, and before round 22 it went out at once.
func TestReview36w_HardFenceAfterPowerOnWaitsForPOST(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckTransitioning{pw}, nil }}
	// The controller has run for long; it powers the host on.
	clk.Advance(10 * time.Minute)
	for i := 0; i < 40 && !pw.HardwareOn(); i++ {
		_, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	require.True(t, pw.HardwareOn(), "the setup: powered on")
	review36uLoop(t, rec, clk, clk.Real().Add(30*time.Second), clk.Real())
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	end := requestAt.Add(10 * time.Minute)
	review36uLoop(t, rec, clk, end, requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(requestAt, requestAt.Add(time.Minute)),
		"a hard keyed fence asked 30 s after the controller powered the host on, its BMC (no button) reading Transitioning while it runs: no power-off within 1 min (within 10 min: %v): held as a soft one would be for POST; status %+v; truth %s",
		pw.WasOffDuring(requestAt, end), h.Status, rebootcheck.DescribeTruth(pw))
}
