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

// stuckReadingNoopOn is a BMC (no button) whose PowerState is stuck on
// Transitioning whatever the host does (its reading froze mid-change:
// the union of stuckTransitioning and stuckPoweringOff), and which
// answers a power-on of a running server with success and does nothing
// (as most BMCs answer ResetType On on a server that is on): unlike the
// fake's On, it does not cancel an OS shutdown under way, which the BMC
// cannot (the OS, once it heard the soft power-off, powers off at the end
// of its shutdown). ons counts the power-ons asked.
type stuckReadingNoopOn struct {
	*fake.Power
	ons *atomic.Int64
}

func (s stuckReadingNoopOn) State(ctx context.Context) (power.State, error) {
	st, err := s.Power.State(ctx)
	if err == nil {
		return power.StateTransitioning, nil
	}
	return st, err
}

func (s stuckReadingNoopOn) On(ctx context.Context) error {
	s.ons.Add(1)
	if s.Power.HardwareOn() {
		return nil // already on: accepted, nothing done; a shutdown under way goes on
	}
	return s.Power.On(ctx)
}

// Review 36 round 25 (TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver):
// 54e6ab0 ends a pending reboot whose requests are all withdrawn before
// the evidence by heldOff's power-on as soon as releasedOn holds
// (decide.go, pending: "len(d.Requests) == 0 && o.Online &&
// c.releasedOn(...)"). releasedOn asks only that the run of Transitioning
// readings is long and that no power-on answered it: it does not ask
// whether the reboot's own power-off is still under way (sent less than
// SoftTimeout + StaleReads ago, the bound pending itself waits for). On a
// BMC stuck reading Transitioning since before the request (the run
// already long), a soft reboot's power-off goes out; the request is
// withdrawn 20 s later, while the OS is shutting down: the very next pass
// sends the power-on, to a host that still runs (accepted, nothing done),
// and the reboot ends. The OS then powers the host off. From then on the
// accepted power-on "answers the run" (calledInRun, once per run) and the
// BMC never reads anything but Transitioning: the host, Online true, no
// request left, stays off for good.
func TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 60 * time.Second})
	var ons atomic.Int64
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckReadingNoopOn{pw, &ons}, nil }}
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.False(t, pw.WasOffDuring(start, clk.Real()), "the setup: the host runs; truth %s", rebootcheck.DescribeTruth(pw))
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "b": ""} // a soft reboot
	}))
	review36uLoop(t, rec, clk, at.Add(20*time.Second), at)
	offs, first, ok := review36FirstOffFrom(pw, at)
	require.True(t, ok, "the setup: the soft power-off went out; power-offs %v", offs)
	require.Equal(t, power.ModeSoft, first.Mode, "the setup: the soft power-off went out first")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Annotations = nil })) // withdrawn
	withdrawn := clk.Real()
	end := withdrawn.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"a soft reboot withdrawn while its OS shutdown was under way, BMC (no button) stuck reading Transitioning, Online true, no request left: off for good 30 min later (the power-on went out during the shutdown and answered the run); status %+v; truth %s",
		h.Status, rebootcheck.DescribeTruth(pw))
}

// nullAlways answers PowerState null whatever the host does (issue 36
// point 4's BMC, whose Redfish service lost its power sensor), while it
// carries out every call.
type nullAlways struct{ *fake.Power }

func (s nullAlways) State(ctx context.Context) (power.State, error) {
	if _, err := s.Power.State(ctx); err != nil {
		return power.StateUnknown, err
	}
	return power.StateUnknown, nil
}

// Review 36 round 25 (TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver):
// heldOff's stuck rule powers a held host off hard once per run of unsure
// readings (calledInRun: an accepted call answers the run for good). The
// run's one ForceOff goes out SoftTimeout + StaleReads into it; someone
// who powers the held host on later in the same run (the BMC still
// answering null) is never answered: the fenced host runs for ever. The
// Hostile kit checks this bound (checkHeldOff: a held host on longer than
// heldOffBound from when it went on, "whatever the readings say", once
// its BMC takes calls) but draws the out-of-band power-on inside a stuck
// spell of at most 20 minutes (oobAt <= stuckFor <= 240 steps) whose end
// brings sane readings that power the host off before the bound: it never
// sees a run that outlasts the bound after the power-on.
func TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var null atomic.Bool
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			if null.Load() {
				return nullAlways{pw}, nil
			}
			return pw, nil
		}}
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	requestAt := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	review36uLoop(t, rec, clk, requestAt.Add(5*time.Minute), requestAt)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers() && !pw.HardwareOn(), "the setup: the fence was carried out; status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	null.Store(true) // from now on the BMC answers null, and takes every call
	review36uLoop(t, rec, clk, clk.Real().Add(20*time.Minute), requestAt)
	pw.OutOfBandOn() // someone powers the fenced host on
	at := clk.Real()
	end := at.Add(40 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fence", "the setup: still held")
	require.True(t, pw.WasOffDuring(at.Add(time.Second), end),
		"a fenced host powered on by someone else 20 min into a run of null readings (its BMC takes every call): still running 40 min later, never powered off (the run's one ForceOff, sent 210 s into it, answers it for good); status %+v; truth %s",
		h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 25 (TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour):
// 54e6ab0's back-off (calledInRun) makes a power-on that was busy answer
// the run of unsure readings until the run has doubled since, at most an
// hour: meant for a dead BMC, it also holds for one 409 busy from a
// healthy one. A host kept off by Online=false for three hours behind a
// BMC (no button) reading Transitioning while off (the run persisted in
// Status.UnsureSince) is set back Online; the released power-on is
// answered busy once (the BMC is running another job), and the host stays
// off for the next hour, where before 54e6ab0 it was tried again after
// RetryDelay.
func TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckPoweringOff{pw}, nil }}
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, first.Add(3*time.Hour), first)
	require.False(t, pw.HardwareOn(), "the setup: Online=false powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultBusy}) // one 409 busy
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	end := at.Add(15 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online set back true after 3 h off behind a BMC reading Transitioning while off; its first power-on answered busy once: still off 15 min later (power-ons %d: the busy call answers the run until it has doubled, at most an hour); status %+v; truth %s",
		review36xCount(pw, fake.OpOn, at), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 25 (TestReview36y_FenceOnDeadBMCStatusChurn):
// the fixer's known weakness, measured. 54e6ab0 backs off the calls and
// Status writes of a held host behind a dead BMC (at most 6 calls and 12
// writes an hour, TestReview36x_FencedHostDeadBMCHammeredForEver), but a
// fence asked of a host whose BMC is dead (the very case a fencing agent
// fences: a node gone NotReady because its rack lost its network) stays
// pending, and pending retries its ForceOff every RetryDelay with two
// Status writes each (ActingSince cleared when the call is decided,
// written back by the next pass): 360 timed-out calls and 720 Status
// writes an hour per host, for as long as the BMC is dead and the
// fencing client waits; a rack of 40 such hosts is ~29,000 API writes
// an hour. The writes say nothing a restart needs (no call of this BMC
// ever returned, none presses the button).
func TestReview36y_FenceOnDeadBMCStatusChurn(t *testing.T) {
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
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	dead.Store(true) // the BMC dies for good
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
	from, writes0 := clk.Real(), store.Updates()
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	offs, writes := review36xCount(pw, fake.OpOff, from), store.Updates()-writes0
	require.LessOrEqual(t, writes, 60,
		"a hard fence pending on a host whose BMC is dead (every call times out): %d Status writes (%d power-offs) in an hour (ActingSince cleared and written back around every ForceOff, retried every RetryDelay)",
		writes, offs)
}

// Review 36 round 25 (TestReview36y_OnlineBackDuringOfflineShutdownOffForEver):
// the idle side of TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver.
// idle's stuckOn (decide.go) powers an Online host on after a long run of
// Transitioning readings unless a power-on already answered the run; it
// does not ask whether a power-off of ours is still under way. On a BMC
// stuck reading Transitioning since before (the run long), Online=false
// sends its soft power-off; Online is set back true 20 s later, while
// the OS shuts down: the next pass powers on the running host (accepted,
// nothing done), the OS then powers it off, and the accepted power-on
// answers the run for good: the host, Online true, stays off.
func TestReview36y_OnlineBackDuringOfflineShutdownOffForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 60 * time.Second})
	var ons atomic.Int64
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return stuckReadingNoopOn{pw, &ons}, nil }}
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, at.Add(20*time.Second), at)
	offs, first, ok := review36FirstOffFrom(pw, at)
	require.True(t, ok, "the setup: the soft power-off went out; power-offs %v", offs)
	require.Equal(t, power.ModeSoft, first.Mode, "the setup: the soft power-off went out first")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	back := clk.Real()
	end := back.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.HardwareOn(),
		"Online set back true 20 s into the OS shutdown Online=false began, BMC (no button) stuck reading Transitioning: off for good 30 min later (power-ons asked %d); status %+v; truth %s",
		ons.Load(), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 25 (TestReview36y_FlappingNullFalseHoldBroken):
// 54e6ab0's hysteresis (aa152e4) keeps a persisted run of unsure readings
// (Status.UnsureSince) going through On or Off spells shorter than
// StaleReads (noteUnsure, Observed.SaneFor): "long null runs broken by
// short honest answers". For a fenced host that is off, behind a BMC
// that answers null 110 s and honestly Off 20 s of every 130 s, the run
// therefore never ends: 210 s in, heldOff's stuck rule takes the host for
// one that may have been powered on, sends a ForceOff and records
// Status.HoldBroken, which Client.HoldBroken hands the fencing agent as
// "processes may have run on the host since" (an alarm, never cleared
// while the hold lasts), though the BMC reads Off every 130 s and the
// host never ran (ground truth). Before 54e6ab0 each Off reading ended
// the run, no run reached 210 s, and no HoldBroken was recorded.
func TestReview36y_FlappingNullFalseHoldBroken(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var flap atomic.Bool
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			if flap.Load() {
				return nullMostOfPeriod{pw, clk, 130 * time.Second, 20 * time.Second}, nil
			}
			return pw, nil
		}}
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	fenced, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: the fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	flap.Store(true)
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	broken, err := client.HoldBroken(ctx, tk)
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, broken.IsZero(),
		"a fenced host, off all along (ground truth), its BMC null 110 s and Off 20 s of every 130 s: the fencing client is told its hold broke at %v (the run of null readings never ends through 20 s Off spells, the stuck rule fires; power-offs since %d); status %+v",
		broken, review36xCount(pw, fake.OpOff, at), h.Status)
}

// Review 36 round 25 (TestReview36y_ClockStepDuringShortNullSpellFalseHoldBroken):
// unsureRun (decide.go) takes the longer of the monotonic run
// (Observed.UnsureFor) and the wall clock's time since the persisted
// Status.UnsureSince. A fenced host, off, its BMC null for 2 minutes (a
// Redfish service restart: the run is persisted at 105 s), the wall clock
// stepped 4 minutes forward at 110 s (an NTP step): the 2-minute run is
// taken for a 6-minute one, heldOff's stuck rule fires, sends a ForceOff
// and records Status.HoldBroken, which the fencing client reads as
// "processes may have run since" though the host never ran (ground
// truth) and no run of unsure readings lasted SoftTimeout + StaleReads.
// The evidence rule itself measures on the monotonic clock so that a
// forward step cannot move it (evidence's doc); the run does not.
func TestReview36y_ClockStepDuringShortNullSpellFalseHoldBroken(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	var null atomic.Bool
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			if null.Load() {
				return nullAlways{pw}, nil
			}
			return pw, nil
		}}
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	fenced, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: the fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	at := clk.Real()
	null.Store(true)
	review36uLoop(t, rec, clk, at.Add(110*time.Second), at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.UnsureSince.IsZero(), "the setup: the null run is persisted; status %+v", h.Status)
	clk.Jump(4 * time.Minute) // an NTP step forward
	review36uLoop(t, rec, clk, at.Add(120*time.Second), at)
	null.Store(false) // the BMC answers again
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	broken, err := client.HoldBroken(ctx, tk)
	require.NoError(t, err)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, broken.IsZero(),
		"a fenced host, off all along, its BMC null for 2 min, the wall clock stepped 4 min forward during it: the client is told its hold broke at %v (power-offs since %d); status %+v",
		broken, review36xCount(pw, fake.OpOff, at), h.Status)
}

// Review 36 round 25 (TestReview36y_RunningHostNullRunsChurnUnsureSince):
// 54e6ab0 persists every host's run of unsure readings (before: held
// hosts only) once it lasts 105 s, and ends it once On or Off readings
// have lasted StaleReads (30 s). Its own bound
// (TestReview36xFix_LongNullRunsBoundedWrites: at most 8 writes an hour)
// is checked with honest spells of 10 s and 25 s only. A running host
// with Online true and no request, its BMC null for 110 s then honest
// for 35 s, over and over (a Redfish service that crashes and restarts
// every two and a half minutes): UnsureSince is written and cleared
// every period, ~50 Status writes an hour per host, for ever (before
// 54e6ab0, which persisted the run of held hosts only, this test passes).
func TestReview36y_RunningHostNullRunsChurnUnsureSince(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) {
			return nullMostOfPeriod{pw, clk, 145 * time.Second, 35 * time.Second}, nil
		}}
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
	from, writes0 := clk.Real(), store.Updates()
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.False(t, pw.WasOffDuring(at, end), "the setup: the host runs all along; truth %s", rebootcheck.DescribeTruth(pw))
	writes := store.Updates() - writes0
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.LessOrEqual(t, writes, 8,
		"a running host, Online true, no request, its BMC null 110 s then honest 35 s, over and over: %d Status writes in an hour (UnsureSince written at 105 s, cleared after 30 s of On readings, every period); status %+v",
		writes, h.Status)
}

// dropFirstOn is stuckPoweringOff (reads Transitioning while the host is
// off) whose first power-on is answered with success but not carried out
// (a BMC that accepts ResetType On and drops it, as one with a pending
// job or a lost IPMI packet does).
type dropFirstOn struct {
	stuckPoweringOff
	dropped *atomic.Bool
}

func (d dropFirstOn) On(ctx context.Context) error {
	if d.dropped.CompareAndSwap(false, true) {
		return nil
	}
	return d.stuckPoweringOff.On(ctx)
}

// Review 36 round 25 (TestReview36y_ReleasedDroppedPowerOnOffForEver):
// the "once per run" of an accepted call (calledInRun) is what leaves a
// host off for good in TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver
// and running while held in TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver;
// here it is alone. Round 23's world (Online=false enforced, the BMC, no
// button, reading Transitioning while the host is off, Online set back
// true): the released power-on is accepted but dropped by the BMC; it
// answers the run for good, and the host, Online true, stays off for good,
// where an On reading or an Off one would have had it powered on again.
func TestReview36y_ReleasedDroppedPowerOnOffForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 20 * time.Second})
	var dropped atomic.Bool
	dropped.Store(true) // nothing dropped until armed
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return dropFirstOn{stuckPoweringOff{pw}, &dropped}, nil }}
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	first := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, first.Add(10*time.Minute), first)
	require.False(t, pw.HardwareOn(), "the setup: Online=false powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	dropped.Store(false) // the next power-on is dropped
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, dropped.Load(), "the setup: a power-on was sent and dropped")
	require.True(t, pw.HardwareOn(),
		"Online set back true, the BMC (no button) reading Transitioning while the host is off, the first power-on accepted and dropped: still off 30 min later (power-ons carried out %d); status %+v; truth %s",
		review36xCount(pw, fake.OpOn, at), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 25 (TestReview36y_BareRebootOnStuckPoweringOffOffForEver):
// the set-and-forget side of TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff,
// which 54e6ab0 answers only when every request is withdrawn
// (pending: len(d.Requests) == 0). A bare reboot (reboot.metal3.io, which
// no client removes: the controller removes it once the host was
// observed off) of a running host whose BMC (no button) reads
// Transitioning while the host is off: the ForceOff powers the host off
// (ground truth), no Off reading ever comes, the annotation stays, the
// reboot stays pending (its ForceOff re-sent every few minutes) and the
// host is never powered on: a reboot turned into a power-off for good,
// though a power-on of this BMC powers nothing off and the readings have
// said Transitioning far longer than any change of power takes.
func TestReview36y_BareRebootOnStuckPoweringOffOffForEver(t *testing.T) {
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
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	end := at.Add(30 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, end), "the setup: the reboot powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(),
		"a bare hard reboot of a running host whose BMC (no button) reads Transitioning while it is off: still off 30 min later (%d power-offs since); annotations %v; status %+v; truth %s",
		review36xCount(pw, fake.OpOff, at), h.Annotations, h.Status, rebootcheck.DescribeTruth(pw))
}
