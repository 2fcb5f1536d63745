package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

func review36xCount(pw *fake.Power, op fake.Op, from time.Time) int {
	n := 0
	for _, c := range pw.Calls() {
		if c.Op == op && !c.At.Before(from) {
			n++
		}
	}
	return n
}

// Review 36 round 24 (TestReview36x_FencedHostDeadBMCHammeredForEver):
// c8716ab's heldOff "stuck" rule powers a held host off hard once its
// readings have been unsure for SoftTimeout + StaleReads, "once per run"
// (calledInRun), but calledInRun counts only an accepted call
// (Class none): a power-off that failed or timed out is retried every
// RetryDelay (wait) for as long as the run lasts. A fenced host (keyed
// hard fence carried out, the host off) whose BMC then dies (every call
// times out: the host lost its power feed, the BMC's network is down)
// reads unknown for ever: from 210 s on it gets a ForceOff every 10 s,
// for ever, each with Status writes (ActingSince cleared before the call
// and written again after it). Before c8716ab a held host read unknown
// was read every PollInterval and sent nothing. A rack PDU failure with
// 40 fenced hosts is some 14,000 timed-out BMC calls and tens of
// thousands of Status writes an hour.
func TestReview36x_FencedHostDeadBMCHammeredForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var dead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers() && !pw.HardwareOn(), "the setup: the fence was carried out; status %+v", h.Status)
	dead.Store(true) // the BMC dies for good; the host stays off (ground truth)
	at := clk.Real()
	writes0 := store.Updates()
	end := at.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	offs, writes := review36xCount(pw, fake.OpOff, at), store.Updates()-writes0
	require.LessOrEqual(t, offs, 6,
		"a fenced host, off, whose BMC died (every call times out): %d power-offs and %d Status writes in an hour (\"once per run\": a failed or timed-out call is retried every RetryDelay for ever)",
		offs, writes)
	require.LessOrEqual(t, writes, 12, "Status writes in an hour for a held, off host with a dead BMC: %d", writes)
}

// refuseOnWhileOn is a BMC stuck reading Transitioning while the host runs
// (stuckTransitioning) that refuses a power-on while the host is on (as
// iDRAC answers ResetType On on a running server: HTTP 409).
type refuseOnWhileOn struct {
	stuckTransitioning
	ons *atomic.Int64 // power-ons asked, refused or not
}

func (r refuseOnWhileOn) On(ctx context.Context) error {
	r.ons.Add(1)
	if r.Power.HardwareOn() {
		return &power.Error{Op: "on", Class: power.ClassFailed, Status: 409, Message: "server is already powered ON"}
	}
	return r.Power.On(ctx)
}

// Review 36 round 24 (TestReview36x_StuckTransitioningRefusedPowerOnEveryRetryDelay):
// c8716ab's idle rule sends a power-on to a host with Online true whose
// readings have said Transitioning for SoftTimeout + StaleReads, "once
// per run", but calledInRun counts only an accepted power-on: a refused
// one (a BMC that answers "already on" with an error, as iDRAC's 409 to
// ResetType On on a running server) is decided again every RetryDelay,
// each with its versioned Status write (LastPoweredOn moved, OnConfirmed
// cleared), for as long as the BMC reads Transitioning: a running host
// with Online true, no request, gets ~360 power-ons and ~360 Status
// writes an hour, for ever. Before c8716ab it got none.
func TestReview36x_StuckTransitioningRefusedPowerOnEveryRetryDelay(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var asked atomic.Int64
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return refuseOnWhileOn{stuckTransitioning{pw}, &asked}, nil }}
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at)
	from := clk.Real()
	writes0, asked0 := store.Updates(), asked.Load()
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.False(t, pw.WasOffDuring(at, end), "the setup: the host runs all along; truth %s", rebootcheck.DescribeTruth(pw))
	ons, writes := asked.Load()-asked0, store.Updates()-writes0
	require.LessOrEqual(t, ons, int64(6),
		"a running host with Online true, its BMC stuck reading Transitioning and refusing On while on: %d power-ons and %d Status writes in an hour (a refused power-on is not \"called in the run\": decided again every RetryDelay)",
		ons, writes)
	require.LessOrEqual(t, writes, 12, "Status writes in an hour: %d", writes)
}

// nullPartOfMinute answers PowerState null for the first 40 s of every
// minute of the clock (a BMC whose Redfish service restarts, or whose
// sessions expire and are re-established, every minute), honestly
// otherwise.
type nullPartOfMinute struct {
	*fake.Power
	clk *fake.Clock
}

func (n nullPartOfMinute) State(ctx context.Context) (power.State, error) {
	st, err := n.Power.State(ctx)
	if err == nil && n.clk.Real().Unix()%60 < 40 {
		return power.StateUnknown, nil
	}
	return st, err
}

// Review 36 round 24 (TestReview36x_HeldHostFlappingNullChurnsUnsureSince):
// c8716ab persists a held host's run of unsure readings
// (Status.UnsureSince) once it has lasted StaleReads, and clears it on
// the first On or Off reading (noteUnsure). A held, off host (a keyed
// fence carried out) whose BMC answers null for 40 s of every minute and
// Off otherwise gets two Status writes a minute, for ever (~120 an hour;
// before c8716ab none): the same churn round 23 fixed for Online=false
// (TestReview36w_OfflineOffHostFlappingNullForceOffForEver: at most 4
// writes an hour), brought back through UnsureSince for every held host.
func TestReview36x_HeldHostFlappingNullChurnsUnsureSince(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var flap atomic.Bool
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			if flap.Load() {
				return nullPartOfMinute{pw, clk}, nil
			}
			return pw, nil
		}}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers() && !pw.HardwareOn(), "the setup: the fence was carried out; status %+v", h.Status)
	flap.Store(true)
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
	from, writes0 := clk.Real(), store.Updates()
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	writes := store.Updates() - writes0
	offs := review36xCount(pw, fake.OpOff, from)
	require.LessOrEqual(t, writes, 4,
		"a held, off host whose BMC answers null 40 s of every minute: %d Status writes (%d power-offs) in an hour (UnsureSince written after StaleReads of null, cleared by the next Off reading)",
		writes, offs)
}

// Review 36 round 24 (TestReview36x_ReleasedOnStuckPoweringOffRestartsEveryThreeMinutes):
// c8716ab answers TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver
// with a power-on after a run of Transitioning readings longer than
// SoftTimeout + StaleReads (210 s), counted by Observed.UnsureFor alone:
// Status.UnsureSince, which makes a restarted controller count the run
// from its start, is written only for a held host (noteUnsure), so for
// a host with Online true the run restarts with every process. The same
// world as the round 23 test, the controller restarted every 3 minutes
// (the period TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes
// answers for a held host): the host Online=true stays off for good.
func TestReview36x_ReleasedOnStuckPoweringOffRestartsEveryThreeMinutes(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	newRec := func() *reboot.Reconciler {
		return &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
			Power: func(string) (power.Controller, error) { return stuckPoweringOff{pw}, nil }}
	}
	rec := newRec()
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
	for clk.Real().Before(end) {
		rec = newRec()
		review36uLoop(t, rec, clk, clk.Real().Add(3*time.Minute), at)
	}
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online set back true on a host powered off by Online=false, its BMC (no button) reading Transitioning while it is off, the controller restarted every 3 minutes: still off 30 min later (the run of unsure readings is persisted only for held hosts); status %+v; truth %s",
		h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 24 (TestReview36x_OfflineOffHostLongNullRunsChurnUnsureSince):
// round 23's own test of the Online=false churn
// (TestReview36w_OfflineOffHostFlappingNullForceOffForEver: at most 4
// Status writes an hour) draws a null on half the reads at random, so a
// run of null readings seldom lasts the StaleReads (six reads) after
// which noteUnsure writes Status.UnsureSince for a host whose
// Online=false power-off is done (OfflineOffSeen). With the same host
// (off all along, Online=false) behind a BMC that answers null 40 s of
// every minute, UnsureSince is written and cleared every minute: ~120
// writes an hour, for ever.
func TestReview36x_OfflineOffHostLongNullRunsChurnUnsureSince(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return nullPartOfMinute{pw, clk}, nil }}
	at := clk.Real()
	half := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, half, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.OfflineOffSeen.IsZero(), "the setup: the enforcement's power-off is done; status %+v", h.Status)
	writes0 := store.Updates()
	end := half.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	writes := store.Updates() - writes0
	require.LessOrEqual(t, writes, 4,
		"an off host with Online=false, its power-off done, BMC answering null 40 s of every minute: %d Status writes in an hour (UnsureSince written after StaleReads of null, cleared by the next Off reading)",
		writes)
}

// Review 36 round 24 (TestReview36x_OfflineUnpluggedHostHammeredForEver):
// the Online=false side of TestReview36x_FencedHostDeadBMCHammeredForEver.
// A host with Online=false, its power-off done (OfflineOffSeen), is then
// unplugged (a rack taken out of service at the PDU: its BMC dead, every
// call times out): from SoftTimeout + StaleReads on, idle's stuckOff
// (decide.go) sends a ForceOff every RetryDelay, for ever, each with
// Status writes, where TestReview36wFix_OfflineOffHostDeadNullBMCOnePowerOffPerRun
// allows one power-off and 3 writes an hour on a BMC that answers null
// but takes its calls.
func TestReview36x_OfflineUnpluggedHostHammeredForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var dead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	// Running at first: Online=false powers it off, and an Off reading
	// shows that done.
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: false})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.OfflineOffSeen.IsZero(), "the setup: the enforcement's power-off is done; status %+v", h.Status)
	dead.Store(true)
	from, writes0 := clk.Real(), store.Updates()
	at = from
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	offs, writes := review36xCount(pw, fake.OpOff, from), store.Updates()-writes0
	require.LessOrEqual(t, offs, 6,
		"an off host with Online=false whose BMC is dead (every call times out): %d power-offs and %d Status writes in an hour",
		offs, writes)
	require.LessOrEqual(t, writes, 12, "Status writes in an hour: %d", writes)
}

// Review 36 round 24 (TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff):
// round 23 answered TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver
// (a BMC that reads Transitioning while the host is off) in idle and in
// heldOff only. A keyed hard fence on the same BMC: the ForceOff powers
// the host off (ground truth), no Off reading ever comes, so the
// evidence never covers the request; the fencing client gives up and
// removes its annotation two minutes later. No request is left, Online
// is true, but the reboot stays pending (pending: its power-off re-sent
// every SoftTimeout + StaleReads + ReissueAfter) and the host is never
// powered on: off for good, though a power-on of this BMC (no button)
// powers nothing off, and no client can undo it (removing every
// annotation does not).
func TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckPoweringOff{pw}, nil }}
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, at.Add(2*time.Minute), at)
	require.False(t, pw.HardwareOn(), "the setup: the fence powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Annotations = nil })) // the client gives up
	released := clk.Real()
	end := released.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"a keyed fence released before any evidence, its host off behind a BMC (no button) reading Transitioning while off, Online true, no annotation left: still off 30 min after the release (%d power-offs since); status %+v; truth %s",
		review36xCount(pw, fake.OpOff, released), h.Status, rebootcheck.DescribeTruth(pw))
}
