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

// stuckTransitioningDropOff is stuckTransitioning (reads Transitioning
// while the host runs, Off once it is off; no button) whose next drop
// power-offs are answered with success and not carried out (a BMC that
// accepts ResetType ForceOff and drops it: a pending job, a lost IPMI
// packet after the answer, a Controller that skipped it).
type stuckTransitioningDropOff struct {
	stuckTransitioning
	drop *atomic.Int64
}

func (s stuckTransitioningDropOff) Off(ctx context.Context, m power.Mode) error {
	if s.drop.Add(-1) >= 0 {
		return nil
	}
	return s.stuckTransitioning.Off(ctx, m)
}

// Review 36 round 26 (TestReview36z_BareRebootDoneWithoutPowerOff):
// f933fe7's releasedPending ends a pending bare reboot as done (heldOff:
// annotation removed, LastPoweredOn written, power-on sent) once its own
// power-off was accepted and SoftTimeout + StaleReads have passed
// (offOver) on a long run of Transitioning readings, taking "accepted"
// for "carried out". On a BMC stuck reading Transitioning while the host
// runs (stuckTransitioning, round 21's BMC), a bare hard reboot's
// ForceOff is accepted and dropped: 210 s later the reboot is reported
// done (annotation removed) though the host never went off (ground
// truth). Before f933fe7 pending re-sent the ForceOff (ReissueAfter) and
// the reboot was carried out.
func TestReview36z_BareRebootDoneWithoutPowerOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var drop atomic.Int64
	w.Power = stuckTransitioningDropOff{stuckTransitioning{pw}, &drop}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	drop.Store(1) // the reboot's first ForceOff is accepted and dropped
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.Annotation: `{"mode":"hard"}`}
	}))
	done := time.Time{}
	for end := at.Add(20 * time.Minute); clk.Real().Before(end); {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		h, err := store.Get(ctx, "h")
		require.NoError(t, err)
		if _, ok := h.Annotations[reboot.Annotation]; !ok && done.IsZero() {
			done = clk.Real()
			break
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.Less(t, drop.Load(), int64(1), "the setup: the first ForceOff was dropped")
	require.False(t, done.IsZero(), "the setup: the reboot ended; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at, done),
		"a bare hard reboot, its ForceOff accepted and dropped by a BMC stuck reading Transitioning while the host runs: reported done (annotation removed) %v after the request though the host never went off (power-offs %d); status %+v; truth %s",
		done.Sub(at), review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 26 (TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack):
// f933fe7's deadBackoff (decide.go, wait) doubles the delay between
// failed or busy calls while the readings are unknown (Call.Fails), on
// the ground that a BMC whose readings are unknown "answers nothing", and
// counts on a reading that is not unknown to end the back-off once it
// answers again. Issue 36 point 4's BMC (its Redfish service lost its
// power sensor: PowerState null for good, every call carried out) never
// gives one: a fence asked of such a host while its network is down
// (every call times out) for 22 minutes waits, once the network is back
// and the BMC takes calls again, for the back-off grown meanwhile (here
// 20 minutes; an hour at most), the host running and the fence
// unanswered. Before f933fe7 the ForceOff was tried every RetryDelay and
// went out within seconds of the network's return.
func TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack(t *testing.T) {
	w := newReview36World()
	clk := w.clk
	var dead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	w.Power = nullAlways{pw}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	dead.Store(true) // the BMC's network goes down
	require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(22*time.Minute), at)
	require.True(t, pw.HardwareOn(), "the setup: no call reached the BMC while its network was down")
	dead.Store(false) // the network is back: the BMC takes every call, its readings still null
	back := clk.Real()
	review36uLoop(t, rec, clk, back.Add(w.cfg.RetryDelay+w.cfg.PollInterval), back)
	offAt := time.Time{}
	for _, tc := range pw.Truth() {
		if !tc.On && !tc.At.Before(back) {
			offAt = tc.At
			break
		}
	}
	review36uLoop(t, rec, clk, back.Add(time.Hour), back)
	for _, tc := range pw.Truth() {
		if !tc.On && !tc.At.Before(back) && offAt.IsZero() {
			offAt = tc.At
		}
	}
	late := "never"
	if !offAt.IsZero() {
		late = offAt.Sub(back).String()
	}
	require.False(t, offAt.IsZero() || offAt.After(back.Add(w.cfg.RetryDelay+w.cfg.PollInterval)),
		"a hard fence of a running host whose BMC reads null for good (lost power sensor), its network down 22 min then back (every call carried out): the ForceOff reached the host %s after the network came back, not within RetryDelay + PollInterval (power-offs during the outage %d); truth %s",
		late, review36xCount(pw, fake.OpOff, at)-review36xCount(pw, fake.OpOff, back), rebootcheck.DescribeTruth(pw))
}

// Review 36 round 26 (TestReview36z_RestartDuringFlappingNullFalseHoldBroken):
// f933fe7 answers TestReview36y_FlappingNullFalseHoldBroken by measuring
// the stuck rules' run on the monotonic clock (Observed.UnsureWhole) for
// a run this process saw begin, but still keeps the persisted
// Status.UnsureSince through On or Off spells shorter than StaleReads
// (noteUnsure), and a restarted controller (UnsureWhole false) counts the
// run from it (unsureRun): so it spans every null run since the first.
// A fenced host, off all along (ground truth), its BMC null 110 s and
// honestly Off 20 s of every 130 s; the controller restarts once (a
// rolling upgrade) 60 s into a null run minutes later: its first passes
// take the run for one of many minutes, heldOff's stuck rule fires, sends
// a ForceOff and records Status.HoldBroken, which Client.HoldBroken hands
// the fencing agent as "processes may have run since", though no run of
// unsure readings lasted SoftTimeout + StaleReads and the host never ran.
func TestReview36z_RestartDuringFlappingNullFalseHoldBroken(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var flap atomic.Bool
	const period, sane = 130 * time.Second, 20 * time.Second
	w.Power = flapSwitch{pw, nullMostOfPeriod{pw, clk, period, sane}, &flap}
	rec := w.newRec()
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
	restarted := false
	for clk.Real().Before(end) {
		phase := time.Duration(clk.Real().UnixNano()) % period
		if !restarted && clk.Real().After(at.Add(5*time.Minute)) && phase >= 60*time.Second && phase < period-sane {
			restarted = true
			h, err := store.Get(ctx, "h")
			require.NoError(t, err)
			require.True(t, h.Status.HoldBroken.IsZero(), "the setup: no HoldBroken before the restart; status %+v", h.Status)
			rec = w.newRec() // one restart, 60 s or more into a 110 s null run
		}
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		if testing.Verbose() && res.Decision.Power != reboot.ActionNone {
			t.Logf("%v %v %v %s %v", clk.Real().Sub(at), res.Decision.Power, res.Decision.Mode, res.Decision.Reason, res.PowerErr)
		}
		next := res.RequeueAfter
		if res.Requeue || next <= 0 {
			next = time.Second
		}
		clk.Advance(min(next, 30*time.Second))
	}
	require.True(t, restarted, "the setup: the controller restarted")
	require.True(t, pw.OffThroughout(at, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
	broken, err := client.HoldBroken(ctx, tk)
	require.NoError(t, err)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, broken.IsZero(),
		"a fenced host, off all along (ground truth), its BMC null 110 s and Off 20 s of every 130 s, the controller restarted once 60 s into a null run: the fencing client is told its hold broke at %v (the restarted controller counts the run from UnsureSince, kept through the Off spells; power-offs since %d); status %+v",
		broken, review36xCount(pw, fake.OpOff, at), h.Status)
}

// flapSwitch is on's controller while flap is set, plain's otherwise.
type flapSwitch struct {
	*fake.Power
	on   power.Controller
	flap *atomic.Bool
}

func (f flapSwitch) State(ctx context.Context) (power.State, error) {
	if f.flap.Load() {
		return f.on.State(ctx)
	}
	return f.Power.State(ctx)
}

// Review 36 round 26 (TestReview36z_OfflineNullSensorForceOffEveryMinuteForEver):
// the accepted-call side of TestReview36y_FenceOnDeadBMCStatusChurn,
// which f933fe7 answers for busy or failed calls only (deadBackoff).
// Online=false on a host whose BMC reads null for good (issue 36 point
// 4: its Redfish service lost its power sensor) and carries out every
// call: the soft power-off, then the hard one at SoftTimeout, power the
// host off (ground truth), but no fresh Off reading ever records the
// enforcement done (OfflineOffSeen), and idle's enforcement branch
// repeats the accepted ForceOff every ReissueAfter (wait's default
// delay) with two Status writes each (ActingSince cleared when the call
// is decided, written back by the next pass): 60 ForceOffs and 120
// Status writes an hour per host, for as long as the host is kept off
// (weeks, for a host parked for maintenance), though the stuck rule of
// an enforcement known done (the heldOff rule) backs off as the run
// doubles and a held host behind a dead BMC gets a few calls an hour.
// A keyed fence of such a host is the same in pending (KeyedFence).
func TestReview36z_OfflineNullSensorForceOffEveryMinuteForEver(t *testing.T) {
	for _, fence := range []bool{false, true} {
		name := "OnlineFalse"
		if fence {
			name = "KeyedFence" // the same in pending: the fence is never answered (no Off reading), its ForceOff repeated
		}
		t.Run(name, func(t *testing.T) {
			w := newReview36World()
			clk := w.clk
			pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 60 * time.Second})
			w.Power = nullAlways{pw}
			rec := w.newRec()
			start := clk.Real()
			review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
			require.NoError(t, w.store.Mutate("h", func(h *reboot.Host) {
				if fence {
					h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
				} else {
					h.Online = false
				}
			}))
			at := clk.Real()
			review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
			require.False(t, pw.HardwareOn(), "the setup: the host was powered off; truth %s", rebootcheck.DescribeTruth(pw))
			from, writes0 := clk.Real(), w.store.Updates()
			end := from.Add(time.Hour)
			review36uLoop(t, rec, clk, end, at)
			require.True(t, pw.OffThroughout(from, end), "the setup: the host stays off; truth %s", rebootcheck.DescribeTruth(pw))
			offs, writes := review36xCount(pw, fake.OpOff, from), w.store.Updates()-writes0
			require.LessOrEqual(t, writes, 60, // TestReview36y_FenceOnDeadBMCStatusChurn's bound
				"%s, the host off (ground truth), its BMC null for good but taking every call: %d Status writes and %d ForceOffs in an hour (the accepted ForceOff repeated every ReissueAfter, ActingSince written around each), for as long as the host is kept off",
				name, writes, offs)
		})
	}
}

// transitioningMostOfPeriod is nullMostOfPeriod reading Transitioning
// (a BMC whose PowerState sticks at "PoweringOn" for minutes now and
// then) instead of null.
type transitioningMostOfPeriod struct{ nullMostOfPeriod }

func (s transitioningMostOfPeriod) State(ctx context.Context) (power.State, error) {
	st, err := s.nullMostOfPeriod.State(ctx)
	if err == nil && st == power.StateUnknown {
		return power.StateTransitioning, nil
	}
	return st, err
}

// Review 36 round 26 (TestReview36z_RunningHostTransitioningRunsChurnUnsureSince):
// f933fe7 answers TestReview36y_RunningHostNullRunsChurnUnsureSince by
// persisting the run only where a stuck rule may read it (runMatters),
// which for an Online host with no reboot pending is any Transitioning
// reading (releasedOn). The same running host, its BMC reading
// Transitioning 110 s then On 35 s, over and over: UnsureSince is written
// at 105 s and cleared after 30 s of On readings every period, ~50 Status
// writes an hour per host for ever, though no run comes near the
// SoftTimeout + StaleReads a stuck rule waits for, and a restart loses
// at most such a short run.
func TestReview36z_RunningHostTransitioningRunsChurnUnsureSince(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk := w.clk
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	w.Power = transitioningMostOfPeriod{nullMostOfPeriod{pw, clk, 145 * time.Second, 35 * time.Second}}
	rec := w.newRec()
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), at) // settle
	from, writes0 := clk.Real(), w.store.Updates()
	end := from.Add(time.Hour)
	review36uLoop(t, rec, clk, end, at)
	require.False(t, pw.WasOffDuring(at, end), "the setup: the host runs all along; truth %s", rebootcheck.DescribeTruth(pw))
	writes := w.store.Updates() - writes0
	h, err := w.store.Get(ctx, "h")
	require.NoError(t, err)
	require.LessOrEqual(t, writes, 8, // TestReview36y_RunningHostNullRunsChurnUnsureSince's bound
		"a running host, Online true, no request, its BMC reading Transitioning 110 s then On 35 s, over and over: %d Status writes in an hour (UnsureSince written at 105 s, cleared after 30 s of On readings, every period); status %+v",
		writes, h.Status)
}

// Review 36 round 26 (TestReview36z_RestartAfterOnlineBackDuringShutdownOffAnHour):
// the restart side of TestReview36y_OnlineBackDuringOfflineShutdownOffForEver,
// which f933fe7 answers with offOver (no stuck power-on until every
// power-off of ours is SoftTimeout + StaleReads old, Observed.SinceOff).
// But Online=true clears OfflineSince at once (idle), and a restarted
// controller counts a previous process's power-off only if a reboot is
// pending, Online=false is enforced or LastPress is set (SinceOff's doc):
// none is, so it takes SinceOff for "as long as it likes". On a BMC (no
// button) stuck reading Transitioning for two hours (the run persisted),
// Online=false sends its soft power-off; Online is set back true 20 s
// into the OS shutdown, and the controller restarts 10 s later (a rolling
// upgrade): its first pass powers the running host on (accepted, nothing
// done), the OS then powers it off, and the power-on answers the run for
// runBackoff (as long as the run was, at most an hour): the host, Online
// true, stays off for an hour.
func TestReview36z_RestartAfterOnlineBackDuringShutdownOffAnHour(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{SoftDelay: 60 * time.Second})
	var ons atomic.Int64
	w.Power = stuckReadingNoopOn{pw, &ons}
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(2*time.Hour), start)
	require.False(t, pw.WasOffDuring(start, clk.Real()), "the setup: the host runs; truth %s", rebootcheck.DescribeTruth(pw))
	at := clk.Real()
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	review36uLoop(t, rec, clk, at.Add(20*time.Second), at)
	offs, first, ok := review36FirstOffFrom(pw, at)
	require.True(t, ok, "the setup: the soft power-off went out; power-offs %v", offs)
	require.Equal(t, power.ModeSoft, first.Mode, "the setup: the soft power-off went out first")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = true }))
	back := clk.Real()
	review36uLoop(t, rec, clk, back.Add(10*time.Second), at)
	rec = w.newRec() // a restart 10 s after Online=true, the OS still shutting down
	restart := clk.Real()
	end := back.Add(20 * time.Minute)
	review36uLoop(t, rec, clk, end, at)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(back, end), "the setup: the OS shutdown powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	require.True(t, pw.HardwareOn(),
		"Online set back true 20 s into the OS shutdown Online=false began, BMC (no button) stuck reading Transitioning for 2 h, the controller restarted 10 s later: still off 20 min later (power-ons asked %d, the last decided %v after the restart); status %+v; truth %s",
		ons.Load(), h.Status.LastPoweredOn.Sub(restart), h.Status, rebootcheck.DescribeTruth(pw))
}

// Review 36 round 26 (TestReview36z_HeldHostPoweredOnLateInLongNullRunRunsAnHour):
// f933fe7 answers TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver
// by repeating heldOff's stuck ForceOff as the run of unsure readings
// doubles (calledInRun, runBackoff: at least 2x(SoftTimeout+StaleReads),
// at most retryCap, an hour). The conformance kit's own bound for a held
// host on by ground truth "whatever the readings say" is heldOffBound
// (reboottest/statemachine.go: LostLanding + 2x(SoftTimeout + StaleReads)
// + ReissueAfter + a minute, 12 minutes by default), which it checks only
// inside stuck spells of at most 20 minutes, where the back-off is still
// short. A fenced host (keyed hard fence carried out, off) whose BMC then
// answers null for good while it takes every call: 2 h 25 min into the
// run, just after a stuck ForceOff, someone powers the host on; the next
// ForceOff goes out when the run has doubled, at most an hour later: the
// fenced host runs for about an hour, five times the kit's bound.
func TestReview36z_HeldHostPoweredOnLateInLongNullRunRunsAnHour(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var null atomic.Bool
	w.Power = flapSwitch{pw, nullAlways{pw}, &null}
	rec := w.newRec()
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
	nullAt := clk.Real()
	review36uLoop(t, rec, clk, nullAt.Add(145*time.Minute), requestAt)
	pw.OutOfBandOn() // someone powers the fenced host on
	at := clk.Real()
	dc := reboot.DefaultConfig()
	bound := reboot.LostLandingOf(w.cfg) + 2*(dc.SoftTimeout+dc.StaleReads) + dc.ReissueAfter + time.Minute // the kit's heldOffBound
	end := at.Add(bound)
	review36uLoop(t, rec, clk, end, at)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.Contains(t, h.Annotations, reboot.AnnotationPrefix+"fence", "the setup: still held")
	require.True(t, pw.WasOffDuring(at.Add(time.Second), end),
		"a fenced host powered on by someone else 2 h 25 min into a run of null readings (its BMC takes every call): still running %v later, the kit's heldOffBound (the stuck ForceOff backs off as the run doubles, up to an hour; power-offs since %d); status %+v; truth %s",
		bound, review36xCount(pw, fake.OpOff, at), h.Status, rebootcheck.DescribeTruth(pw))
}
