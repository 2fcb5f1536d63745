package reboot

// This file: the rules of a host's three situations: a reboot pending
// (pending), a host held off by keyed requests (heldOff), and neither
// (idle, with Online=false's enforcement), and the deprovisioned host.

import (
	"slices"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

func (c Config) deprovision(o Observed, d *Decision) {
	for k := range o.Annotations {
		if IsRebootAnnotation(k) {
			d.RemoveAnnotations = append(d.RemoveAnnotations, k)
		}
	}
	slices.Sort(d.RemoveAnnotations)
	d.Requests = nil
	d.Status.PendingRebootSince = time.Time{}
	d.Status.Mode = power.ModeSoft
	d.Status.Seen, d.Status.LastRequestSeen = nil, time.Time{}
	d.Status.RewriteSeen, d.Status.LastRewriteSeen = time.Time{}, time.Time{}
	d.Status.OfflineSince, d.Status.OfflineMode, d.Status.OfflineOffSeen = time.Time{}, power.ModeSoft, time.Time{}
	d.Status.UnsureSince, d.Status.UnsureInterrupted, d.Status.UnsureUnbroken = time.Time{}, false, false
	d.Status.StuckGaveUp = time.Time{}
	d.Phase = PhaseDeprovisioned
	d.Reason = "deprovisioned: reboot requests cleared"
	d.UpdateStatus = !d.Status.Equal(o.Status) || len(d.RemoveAnnotations) > 0
}

// softFailedFor reports whether c is a soft power-off that failed or was
// answered unsupported, decided for w (the reboot or the Online=false
// enforcement under way): one of an earlier reboot, of an enforcement
// that ended, or of unknown work says nothing of this one, and must not
// turn its soft power-off into a hard cut before it was tried. (No time
// is compared: the call's, a late answer's especially, is only bounded,
// and the work's is truncated to Config.Precision.)
func (c Call) softFailedFor(w Work) bool {
	return c.Action == ActionPowerOff && c.Mode == power.ModeSoft &&
		(c.Class == power.ClassUnsupported || c.Class == power.ClassFailed) && c.For.Is(w)
}

// pending decides for a host with a pending reboot.
func (c Config) pending(o Observed, now, p time.Time, hasBare, hasKeyed, wantHard bool, d *Decision) {
	st := &d.Status
	last := o.LastCall
	mode := st.Mode
	if wantHard {
		st.Mode = power.ModeHard
	}
	run := c.unsureRun(o, st, now)
	if st.Covers() || c.releasedPending(o, st, run, now, hasKeyed, len(d.Requests) == 0) {
		// No keyed request left before the evidence came, on a BMC that
		// reads Transitioning for long: the evidence may never come (a
		// BMC stuck on it while the host is off), so the reboot ends as
		// a released one, by heldOff's power-on
		// (TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff,
		// TestReview36y_BareRebootOnStuckPoweringOffOffForEver).
		c.heldOff(o, now, p, hasBare, hasKeyed, d)
		return
	}
	if c.bareStuck(o, st, run, now, p, hasBare, hasKeyed, d) {
		return
	}
	if o.Power == power.StateOn && hasKeyed && st.answered() && !st.HoldBroken.After(st.LastPoweredOff) {
		// A request joined a reboot whose evidence answered earlier ones
		// (a client may have been told fenced, and holds the host with
		// its keyed request): someone else powered the host on, as
		// heldOff records it
		// (TestReview36ab_HeldHostPoweredOnWhileSecondFenceJoinsNoHoldBroken).
		st.HoldBroken = p
	}

	d.Phase = PhasePoweringOff
	if st.Mode == power.ModeSoft {
		softFailed := last.softFailedFor(Work{Reboot: true, Since: st.PendingRebootSince, N: st.Works})
		switch {
		case softFailed:
			st.Mode = power.ModeHard
			d.Reason = "soft power-off " + last.Class.String() + ": fall back to hard"
		case c.softTimedOut(o, st.PendingRebootSince, st.SoftSince, now):
			st.Mode = power.ModeHard
			d.Reason = "soft power-off timed out: fall back to hard"
		}
	}
	if st.Mode == power.ModeHard && mode == power.ModeSoft && d.Reason == "" {
		d.Reason = "hard reboot requested: escalate"
	}
	// The mode sent: soft in place of hard on a BMC that offers no hard
	// power-off (Observed.HardUnsupportedAt); the reboot's mode stays hard.
	send := c.offMode(o, st.Mode, now)
	// Look again soon: after a power-off, quickly at first, backing off to
	// PollInterval; after an unknown reading, quickly at first, backing
	// off to PollInterval while the readings stay unknown (a BMC that
	// answers null is not read every QuickPoll for ever); an Off reading
	// as soon as it can be evidence.
	requeue := func() time.Duration {
		r := c.readBackoff(last, now)
		switch o.Power {
		case power.StateUnknown:
			r = c.unknownBackoff(o)
		case power.StateOff:
			r = min(r, max(c.untilEvidence(o, st), c.Precision/10))
		}
		if due := c.softDue(st.PendingRebootSince, st.SoftSince); st.Mode == power.ModeSoft && due.After(now) {
			r = min(r, due.Sub(now))
		}
		return c.cap(r)
	}
	// A transitioning reading after this reboot's own power-off (in the
	// mode it keeps) is that power-off under way: wait. Before one was
	// sent it shows nothing of ours (a BMC stuck reading Transitioning
	// while the host runs): the power-off goes out as on any reading
	// (TestReview36u_StuckTransitioningHardRebootNeverSent,
	// TestReview36u_StuckTransitioningSoftRebootNeverFallsBackHard).
	// A power-off is under way at most SoftTimeout + StaleReads (an OS's
	// shutdown, then a reading that cannot echo it): after that the
	// reading shows nothing of ours either (the host powered on again by
	// someone else, the BMC stuck), and the power-off goes out again
	// (TestRebootStateMachineStuck's saved case).
	sentOff := last.Action == ActionPowerOff && last.For.Is(st.work())
	since := now.Sub(last.At)
	underWay := sentOff && since >= 0 && since < c.SoftTimeout+c.StaleReads
	if sentOff && last.Class == power.ClassNone && o.Power == power.StateTransitioning &&
		since >= 0 && since < 2*(c.SoftTimeout+c.StaleReads) && !c.unsureLong(run) {
		// Transitioning since shortly after our accepted power-off: wait
		// until the run is long, when a reboot no keyed request holds
		// ends (releasedPending), rather than power off again just
		// before it.
		underWay = true
	}
	if o.Power == power.StateTransitioning && st.Mode == mode && underWay {
		d.Reason = "powering off: wait"
		d.RequeueAfter = requeue()
		return
	}
	if !sentOff && send == power.ModeSoft && c.poweringOn(o, st, now) {
		// A power-on of ours may still be under way (POST): a soft
		// power-off now goes unheard and starts SoftTimeout
		// (TestReview36v_SoftRequestWhilePoweringOnCutHard).
		d.Reason = "powering on (power-on sent recently): wait"
		d.RequeueAfter = c.poweringOnWait(o, st, now)
		return
	}
	if c.wait(last, ActionPowerOff, send, now, o.Power, d) {
		if last.Class == power.ClassNone {
			d.RequeueAfter = min(d.RequeueAfter, requeue())
			if o.Power == power.StateOff {
				d.Reason = "off, but the reading may predate the latest request: look again"
			}
		}
		return
	}
	// A power-off that sets the power powers nothing on, so it is sent
	// whatever the reading: on, unknown, or an Off that may echo a state
	// from before the request. One that may press the power button is
	// sent only on an On reading that cannot be an echo (pressWait).
	if w, no := c.landWait(o); no {
		d.Reason = "a press whose answer was lost may still land: hold back the power-off " + send.String() + " until it has"
		d.RequeueAfter = c.cap(min(w, requeue()))
		return
	}
	if w, no := c.pressWait(o, send); no {
		if d.Reason == "" {
			d.Reason = "power-off presses the power button: wait for an On reading that cannot be an echo"
		}
		d.RequeueAfter = c.cap(min(w, requeue()))
		return
	}
	if st.Mode == power.ModeSoft && !st.softSent() {
		st.SoftSince = p // SoftTimeout counts from the first soft power-off
	}
	st.noteSaneOff(o.Power, p) // for OffOnSane, once the call is known accepted (releasedPending)
	d.sendOff(send, st.Mode)
	if d.Reason == "" && last.Action == ActionPowerOff && last.Mode == send && last.Class == power.ClassNone && o.Power == power.StateOn {
		d.Reason = "power-off accepted but the host reads on (skipped or lost): power off " + send.String() + " again"
	}
	if send != st.Mode {
		d.Reason = "hard power-off unsupported by the BMC: power off soft"
	}
	if d.Reason == "" {
		switch o.Power {
		case power.StateOff:
			d.Reason = "off reading may predate the request: power off " + send.String()
		case power.StateUnknown:
			d.Reason = "power state unknown: power off " + send.String() + " (powers nothing on)"
		default:
			d.Reason = "reboot requested: power off " + send.String()
		}
	}
	d.RequeueAfter = c.QuickPoll
}

// heldOff decides for a pending reboot whose evidence covers every
// request seen: the reboot's power-off has happened.
func (c Config) heldOff(o Observed, now, p time.Time, hasBare, hasKeyed bool, d *Decision) {
	st := &d.Status
	d.Phase = PhaseHeldOff
	held := hasKeyed || !o.Online
	unsure := isUnsure(o.Power)
	run := c.unsureRun(o, st, now)
	// A held host whose readings have said neither On nor Off for longer
	// than any change of power takes may have been powered on by someone
	// else (its BMC stuck reading Transitioning or null while it runs):
	// powered off as on an On reading, again after a back-off while the
	// run lasts (calledInRun: someone may power it on later in the run)
	// (TestReview36w_HeldHostOnStuckTransitioningNeverPoweredOff,
	// TestReview36w_HeldHostOnNullNeverPoweredOff,
	// TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver).
	// HoldBroken is recorded then: the evidence cannot tell whether it
	// ran. A released host is so powered on on a Transitioning reading
	// (never an unknown one), if that powers nothing off
	// (TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver's rule).
	long := unsure && c.unsureLong(run)
	stuck := held && long && !c.calledInRun(o, run, ActionPowerOff, now)
	released := !held && c.releasedOn(o, run, now)
	switch {
	case stuck:
		if !st.HoldBroken.After(st.LastPoweredOff) {
			st.HoldBroken = p
		}
		d.Phase = PhasePoweringOff
		c.stuckOff(o, now, "held host", d)
		return
	case o.Power == power.StateOn:
		if !held {
			break // released: power on (it powers nothing off)
		}
		// Someone else powered the held host on: record it (once per
		// evidence) and power it off again at once, hard whatever the
		// reboot's mode: the host may sit where the power button does
		// nothing (firmware setup, a boot loader, an OS that ignores
		// ACPI), and a soft power-off sent for ever would leave it
		// running while it is held. On a BMC that answered hard
		// unsupported, soft is the only power-off there is.
		if !st.HoldBroken.After(st.LastPoweredOff) {
			st.HoldBroken = p
		}
		d.Phase = PhasePoweringOff
		send := c.offMode(o, power.ModeHard, now)
		if c.wait(o.LastCall, ActionPowerOff, send, now, o.Power, d) {
			d.RequeueAfter = min(d.RequeueAfter, c.cap(c.readBackoff(o.LastCall, now)))
			return
		}
		if w, no := c.landWait(o); no {
			d.Reason = "held host read on; a press whose answer was lost may still land: hold back the power-off until it has"
			d.RequeueAfter = c.cap(w)
			return
		}
		if w, no := c.pressWait(o, send); no {
			d.Reason = "held host read on; its power-off presses the power button: wait for an On reading that cannot be an echo"
			d.RequeueAfter = c.cap(w)
			return
		}
		d.sendOff(send, power.ModeHard)
		d.Reason = "held host read on (powered on by someone else): power off " + send.String()
		d.RequeueAfter = c.QuickPoll
		return
	case released:
		// released, readings unsure for long: power on below
	case o.Power == power.StateTransitioning:
		d.Reason = "off; power changing: look again"
		d.RequeueAfter = c.cap(c.readBackoff(o.LastCall, now))
		if held || !o.OnToggles {
			d.RequeueAfter = min(d.RequeueAfter, c.unsureWait(run))
		}
		return
	case o.Power == power.StateUnknown:
		if !held {
			// No power-on on an unknown state: on some BMCs it is a toggle.
			d.Reason = "off and released, power state unknown: look again"
			d.RequeueAfter = c.cap(c.unknownBackoff(o))
			return
		}
	}
	d.RequeueAfter = c.PollInterval // a held host is read every PollInterval
	if unsure {
		d.RequeueAfter = c.unsureWait(run)
	}
	if w := c.untilRewrite(st, now); w > 0 {
		d.RequeueAfter = min(d.RequeueAfter, c.cap(w)) // a re-add may be answered sooner
	}
	if !o.Online {
		d.Reason = "off; held while Online is false"
		return
	}
	if hasBare {
		d.RemoveAnnotations = append(d.RemoveAnnotations, Annotation)
		st.Seen = slices.DeleteFunc(slices.Clone(st.Seen), func(k string) bool {
			return strings.HasPrefix(k, Annotation+"#")
		})
	}
	if hasKeyed {
		d.Reason = "off; held until every keyed annotation is removed"
		return
	}
	if latest := maxTime(maxTime(st.PendingRebootSince, st.LastRequestSeen), maxTime(st.RewriteSeen, st.LastRewriteSeen)); !p.After(latest) {
		// LastPoweredOn must end up later than every request it answers,
		// and is never written ahead of the clock: wait for the clock to
		// pass them, also after a backwards jump.
		d.Reason = "off; waiting for the clock to pass the latest request"
		d.RequeueAfter = c.cap(latest.Add(c.Precision).Sub(now))
		return
	}
	if w, no := c.onPressWait(o); no {
		if o.Power == power.StateOn {
			// Released, and powered on by someone else meanwhile, on a
			// BMC whose power-on presses the power button: a press would
			// shut the host down. The reboot ends with no call
			// (TestReview36af_ReleasedOnHostPressedOff).
			st.LastPoweredOn, st.OnConfirmed = p, time.Time{}
			st.Seen = nil
			d.UpdateStatus = true
			d.Phase = PhaseIdle
			d.Reason = "released, and powered on by someone else meanwhile: done (a power-on would press the power button)"
			return
		}
		d.Reason = "off and released; the power-on presses the power button: wait for an Off reading that cannot be an echo"
		d.RequeueAfter = c.cap(w)
		return
	}
	if c.wait(o.LastCall, ActionPowerOn, power.ModeSoft, now, o.Power, d) {
		return
	}
	st.LastPoweredOn, st.OnConfirmed = p, time.Time{}
	st.Seen = nil
	d.Power = ActionPowerOn
	d.UpdateStatus = true // a versioned write before every power-on
	d.Phase = PhasePoweringOn
	d.Reason = "off and released: power on"
	if o.Power == power.StateOn {
		d.Reason = "released, and powered on by someone else meanwhile: power on"
	}
	d.RequeueAfter = c.PollInterval
}

// endOffline ends an Online=false enforcement in status st, and its
// power-on owed (Online is true again, and the host reads on or its
// power-on is decided).
func (st *Status) endOffline() {
	st.OfflineSince, st.OfflineMode, st.OfflineOffSeen = time.Time{}, power.ModeSoft, time.Time{}
}

// owePowerOn ends the Online=false enforcement in status st (Online is
// true again) and keeps, in OfflineOffSeen alone, the record that the
// host was powered off for Online=false and is owed a power-on, until
// endOffline: a later Online=false begins a new enforcement, soft first
// (TestReview40aq_OnlineFalseAgainAfterUnreadableOnlineTrueCutHardAtOnce),
// which does not hold the host as off
// (TestReview40aq_OnlineFalseAgainHostPoweredOnMeanwhileHeldAsOff).
func (st *Status) owePowerOn() {
	if st.OfflineSince.IsZero() {
		return
	}
	if st.OfflineOffSeen.IsZero() {
		st.OfflineOffSeen = st.OfflineSince
	}
	st.OfflineSince, st.OfflineMode = time.Time{}, power.ModeSoft
}

// shutdownMayRun reports whether status st owes a power-on (an
// Online=false enforcement ended with Online true again: OfflineOffSeen
// alone) whose enforcement sent a soft power-off (OfflineSoftSince) less
// than 2x SoftTimeout + StaleReads before now: the OS it asked to shut
// down may still be doing so (the last soft power-off goes at most
// SoftTimeout after the first, and its shutdown runs at most SoftTimeout
// + StaleReads), as a restarted controller counts it (offlineOffRecent).
func (c Config) shutdownMayRun(st *Status, now time.Time) bool {
	return st.OfflineSince.IsZero() && !st.OfflineOffSeen.IsZero() && !st.OfflineSoftSince.IsZero() &&
		now.Sub(st.OfflineSoftSince) < c.shutdownBound()
}

// shutdownBound is how long after its first soft power-off an OS
// shutdown of ours may still run: the last soft power-off goes at most
// SoftTimeout after the first, and its shutdown runs at most SoftTimeout
// + StaleReads (A2).
func (c Config) shutdownBound() time.Duration { return 2*c.SoftTimeout + c.StaleReads }

// idle decides for a host with no pending reboot: power follows Online.
func (c Config) idle(o Observed, now, p time.Time, d *Decision) {
	st := &d.Status
	d.Phase = PhaseIdle
	// With no reboot pending an Off reading only matters for powering on:
	// one that may echo the state from before this controller's last
	// power-on is waited out. The Online=false enforcement ends only when
	// Online becomes true, never on an Off reading: a fresh one records
	// its power-off done (OfflineOffSeen).
	fresh := o.Power == power.StateOff && o.QuietFor >= c.StaleReads
	unsure := isUnsure(o.Power)
	run := c.unsureRun(o, st, now)
	if o.Online {
		// Online again: the enforcement is over (a later Online=false
		// begins a new one). Until the host reads on in a reading that
		// cannot echo the state from before a call of ours (here), or
		// until a power-on is decided (below), the status keeps the
		// record that this controller powered the host off for
		// Online=false and owes it a power-on (owePowerOn, statusBusy):
		// a pass that must wait (power state unknown, an Off reading
		// that may be stale, a press that may land) keeps the host busy,
		// and its key and the HostLister keep it
		// (TestReview40ap_OnlineTrueAgainWhileBMCUnreadableLeftOffForGood,
		// TestReview40ap_HeldKeyForgottenWhenOnlineTrueMeetsUnreadableBMC).
		// A soft power-off of ours may still be shutting the OS down
		// (2x SoftTimeout + StaleReads after the first, offlineOffRecent's
		// bound): an On reading then does not end the enforcement, so the
		// power-on stays owed and the host busy until it reads Off (and
		// is powered on) or the shutdown's time is over
		// (TestReview40az_OnlineBackDuringSoftOffLetGoOffForGood).
		st.owePowerOn()
		if o.Power == power.StateOn && o.QuietFor >= c.StaleReads && !c.shutdownMayRun(st, now) {
			st.endOffline()
		}
	}
	if o.Power == power.StateOn && o.QuietFor >= c.StaleReads && !st.LastPoweredOn.IsZero() {
		// On after the last power-on, in a reading that cannot echo the
		// state from before it: one write per power-on.
		st.OnConfirmed = st.LastPoweredOn
	}
	// A run of unsure readings longer than any change of power shows
	// nothing under way: act as if the host were in the wrong state (a
	// BMC stuck reading Transitioning or null), again after a back-off
	// while the run lasts (calledInRun). A power-on goes out only on a
	// Transitioning reading (never in a pass whose reading is unknown,
	// package doc, Guarantees), and only once a power-off of ours is
	// over (releasedOn).
	stuckOff := unsure && c.unsureLong(run) && !c.calledInRun(o, run, ActionPowerOff, now)
	switch {
	case o.Online && c.releasedOn(o, run, now):
		// A power-on that sets the power powers nothing off
		// (TestReview36w_ReleasedOnStuckPoweringOffStaysOffForEver).
		// One that may press the power button waits for a sane reading.
		if c.wait(o.LastCall, ActionPowerOn, power.ModeSoft, now, o.Power, d) {
			return
		}
		st.LastPoweredOn, st.OnConfirmed = maxTime(p, st.LastPoweredOn), time.Time{}
		st.endOffline()
		d.Power = ActionPowerOn
		d.UpdateStatus = true // a versioned write before every power-on
		d.Reason = "Online: power state " + o.Power.String() + " for long: power on (powers nothing off)"
		d.RequeueAfter = c.PollInterval
	case o.Online && unsure:
		d.Reason = "power state " + o.Power.String() + ": wait"
		d.RequeueAfter = c.PollInterval
		if !o.OnToggles && o.Power == power.StateTransitioning {
			d.RequeueAfter = c.unsureWait(run)
		}
	case o.Online && o.Power == power.StateOff && !fresh:
		d.Reason = "off reading may be stale (power-on sent recently): wait"
		d.RequeueAfter = c.cap(c.StaleReads - o.QuietFor)
	case o.Online && o.Power == power.StateOff:
		if w, no := c.onPressWait(o); no {
			// A power-on that presses the power button: not while a lost
			// press may still land, nor on an Off reading that may echo
			// (TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand).
			d.Reason = "off; the power-on presses the power button: wait until no press of ours may land and the reading cannot be an echo"
			d.RequeueAfter = c.cap(w)
			return
		}
		if c.wait(o.LastCall, ActionPowerOn, power.ModeSoft, now, o.Power, d) {
			return
		}
		st.LastPoweredOn, st.OnConfirmed = maxTime(p, st.LastPoweredOn), time.Time{}
		st.endOffline()
		d.Power = ActionPowerOn
		d.UpdateStatus = true // a versioned write before every power-on
		d.Reason = "Online: power on"
		d.RequeueAfter = c.PollInterval
	case !o.Online && !st.OfflineSince.IsZero() && !st.OfflineOffSeen.IsZero() && (o.Power == power.StateOff || unsure):
		// The enforcement's power-off is done (a fresh Off reading): a
		// reading that says neither On nor Off repeats nothing
		// (TestReview36w_OfflineOffHostFlappingNullForceOffForEver),
		// unless such readings last for long: the host may have been
		// powered on, and is held off by a power-off that sets the
		// power, again every 2x(SoftTimeout + StaleReads) (the heldOff rule).
		d.Reason = "off; held while Online is false"
		d.RequeueAfter = c.PollInterval
		if unsure {
			d.RequeueAfter = c.unsureWait(run)
		}
		if stuckOff {
			c.stuckOff(o, now, "Online is false", d)
		}
	case !o.Online && !st.OfflineSince.IsZero() && c.freshOff(o):
		st.OfflineOffSeen = p
		d.Reason = "Online is false: off (power-off done)"
		d.RequeueAfter = c.PollInterval
	case !o.Online && st.OfflineSince.IsZero() && c.poweringOn(o, st, now):
		// A power-on of ours may still be under way (POST): the
		// enforcement begins once the host reads on, or once the bound
		// has passed (TestReview36v_OfflineWhilePoweringOnCutHard).
		d.Reason = "Online is false; powering on (power-on sent recently): wait"
		d.RequeueAfter = c.poweringOnWait(o, st, now)
	case !o.Online && st.OfflineSince.IsZero() && c.freshOff(o):
		// Already off when Online=false came (powered off by hand, never
		// powered on), or off again after an earlier enforcement whose
		// power-on was owed (OfflineOffSeen alone): nothing to power off.
		// Recorded as an enforcement whose power-off is done, so that the
		// status reads "Online=false and known off" (statusBusy): else
		// the host would be busy for ever, never forgotten when unlisted
		// and listed by the HostLister after every restart
		// (TestReview40as_OnlineFalseHostAlreadyOffNeverForgotten,
		// TestReview40as_OwedMarkerOffHostOnlineFalseAgainNeverForgotten).
		st.OfflineSince, st.OfflineMode, st.OfflineSoftSince, st.OfflineOffSeen = p, power.ModeSoft, time.Time{}, p
		d.Reason = "Online is false: off"
		d.RequeueAfter = c.PollInterval
	case !o.Online && o.Power != power.StateOff:
		// On, unknown or transitioning: the host is not known off. The
		// enforcement begins on any of them (a BMC may answer null or
		// stuck Transitioning while the host runs,
		// TestReview36u_OfflineNullReadingsNeverPowerOff); a power-off
		// that presses still needs an On reading (pressWait), one that
		// sets the power powers nothing on. An accepted hard power-off
		// is repeated every ReissueAfter (wait) on any reading but Off
		// until a fresh Off reading shows it done: it may have been lost
		// or skipped, and a ForceOff powers nothing on
		// (TestReview36v_OfflineLostHardOffNeverRepeatedOnNull). After
		// that, an On reading (or a long unsure run) begins a new
		// episode, soft first
		// (TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce).
		if st.OfflineSince.IsZero() || !st.OfflineOffSeen.IsZero() {
			st.OfflineSince, st.OfflineMode, st.OfflineSoftSince, st.OfflineOffSeen = p, power.ModeSoft, time.Time{}, time.Time{}
			st.Works++
		}
		last := o.LastCall
		softFailed := last.softFailedFor(Work{Since: st.OfflineSince, N: st.Works})
		if st.OfflineMode == power.ModeSoft && (softFailed || c.softTimedOut(o, st.OfflineSince, st.OfflineSoftSince, now)) {
			st.OfflineMode = power.ModeHard
		}
		mode := c.offMode(o, st.OfflineMode, now)
		due := c.softDue(st.OfflineSince, st.OfflineSoftSince)
		if c.wait(last, ActionPowerOff, mode, now, o.Power, d) {
			if mode == power.ModeSoft && due.After(now) {
				d.RequeueAfter = min(d.RequeueAfter, c.cap(due.Sub(now)))
			}
			return
		}
		if w, no := c.landWait(o); no {
			d.Reason = "Online is false; a press whose answer was lost may still land: hold back the power-off until it has"
			d.RequeueAfter = c.cap(w)
			return
		}
		if w, no := c.pressWait(o, mode); no {
			d.Reason = "Online is false; the power-off presses the power button: wait for an On reading that cannot be an echo"
			if st.OfflineMode == power.ModeSoft && due.After(now) {
				w = min(w, due.Sub(now)) // the hard fallback may come first
			}
			d.RequeueAfter = c.cap(w)
			return
		}
		if st.OfflineMode == power.ModeSoft && !softSent(st.OfflineSince, st.OfflineSoftSince) {
			st.OfflineSoftSince = p // SoftTimeout counts from the first soft power-off
		}
		d.sendOff(mode, st.OfflineMode)
		d.Reason = "Online is false: power off " + mode.String()
		if o.Power != power.StateOn {
			d.Reason += " (power state " + o.Power.String() + "; powers nothing on)"
		}
		d.RequeueAfter = c.QuickPoll
	default:
		d.Reason = "power matches Online"
	}
	if d.Power == ActionNone && o.Online && !st.LastPoweredOn.IsZero() && !st.OnConfirmed.Equal(st.LastPoweredOn) &&
		o.QuietFor < c.StaleReads+c.PollInterval {
		// A power-on not confirmed yet, shortly after it: look again
		// soon, once a reading cannot echo, to confirm it (OnConfirmed).
		w := c.cap(max(c.StaleReads-o.QuietFor, c.QuickPoll))
		if d.RequeueAfter <= 0 || d.RequeueAfter > w {
			d.RequeueAfter = w
		}
	}
}
