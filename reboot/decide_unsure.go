package reboot

import (
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// isUnsure reports whether a reading says neither On nor Off.
func isUnsure(p power.State) bool {
	return p == power.StateUnknown || p == power.StateTransitioning
}

// unsureRun is how long the readings have said neither On nor Off, up
// to this pass's (zero on an On or Off reading): Observed.UnsureFor if
// it covers the whole run (Observed.UnsureWhole), else the longer of it
// and the time since Status.UnsureSince (a run that began before a
// restart), once this process has itself seen unsure readings for
// unsureNote, and only if the status says no On or Off reading came
// since UnsureSince (Status.UnsureUnbroken: not in an older version's
// status, nor once Status.UnsureInterrupted). UnsureSince is kept
// through spells of On or Off readings shorter than StaleReads
// (noteUnsure: no write per run of a flapping BMC), so it may date an
// earlier run: a process that has seen only the end of a short run
// would take several runs for one and act on a host off all along
// (TestReview36z_RestartDuringFlappingNullFalseHoldBroken,
// TestReview36aa_RestartEarlyInLongerFlappingNullFalseHoldBroken,
// TestReview36ab_UpgradeEarlyInLongerFlappingNullFalseHoldBroken).
// Waiting for unsureNote of its own leaves a restart at most that late
// on a run that is long.
func (c Config) unsureRun(o Observed, st *Status, now time.Time) time.Duration {
	if !isUnsure(o.Power) {
		return 0
	}
	run := o.UnsureFor
	if o.UnsureWhole || run < c.unsureNote() || st.UnsureInterrupted || !st.UnsureUnbroken {
		return run
	}
	if at := st.UnsureSince; !at.IsZero() && !at.After(now) {
		run = max(run, now.Sub(at))
	}
	return run
}

// noteUnsure records in st.UnsureSince the run of unsure readings of a
// host once it has lasted half of SoftTimeout + StaleReads (the run a
// stuck rule waits for, unsureLong), if a stuck rule may read it (runMatters),
// and clears it once On or Off readings have lasted saneClears
// (Observed.SaneFor; see Status.UnsureSince). Runs shorter than that,
// however often they come, write nothing
// (TestReview36x_HeldHostFlappingNullChurnsUnsureSince,
// TestReview36x_OfflineOffHostLongNullRunsChurnUnsureSince), nor do
// runs no rule reads (TestReview36y_RunningHostNullRunsChurnUnsureSince).
// A shorter spell of On or Off readings marks it interrupted
// (Status.UnsureInterrupted, and no longer UnsureUnbroken), once: a
// controller restarted later during a run does not count from it, nor
// from one an older version wrote (no UnsureUnbroken). Such a controller, once it has
// read unsure readings for unsureNote itself, writes the run anew from
// its first one (it did not see the run begin: no earlier instant is
// known to be in it), and so does one that saw a whole run last
// unsureLong (a write the stuck rules make anyway); runs seen whole and
// shorter write nothing, so a flapping BMC costs no write per run
// (TestReview36xFix_LongNullRunsBoundedWrites).
func (c Config) noteUnsure(o Observed, now time.Time, st *Status) {
	if !isUnsure(o.Power) {
		switch {
		case o.SaneFor >= c.saneClears(o, st):
			st.UnsureSince, st.UnsureInterrupted, st.UnsureUnbroken = time.Time{}, false, false
		case !st.UnsureSince.IsZero():
			st.UnsureInterrupted, st.UnsureUnbroken = true, false
		}
		return
	}
	if o.UnsureFor < c.unsureNote() || !runMatters(o, st) {
		return
	}
	untrusted := st.UnsureInterrupted || !st.UnsureUnbroken
	anew := untrusted && (!o.UnsureWhole || c.unsureLong(o.UnsureFor))
	if st.UnsureSince.IsZero() || anew {
		st.UnsureSince, st.UnsureInterrupted = now.Add(-o.UnsureFor).Truncate(c.Precision), false
		st.UnsureUnbroken = true
	}
}

// runMatters reports whether a stuck rule may read the run of unsure
// readings after a restart: a reboot is pending (held, or its release,
// releasedPending), Online is false (the enforcement's stuckOff), or the
// reading is Transitioning (an Online host's power-on, releasedOn). An
// Online host with no reboot pending whose readings are unknown is never
// acted on for them: its run is not persisted.
func runMatters(o Observed, st *Status) bool {
	return st.Pending() || !o.Online || o.Power == power.StateTransitioning
}

// saneClears is how long On or Off readings last before they end a
// persisted run of unsure readings (noteUnsure): StaleReads, or for an
// Online host with no reboot pending SoftTimeout + StaleReads, the run a
// stuck rule waits for. Such a host's run is persisted only for
// releasedOn, whose power-on on a Transitioning reading powers nothing
// off: a value kept through On spells shorter than that (a BMC that
// reads Transitioning for minutes now and then while the host runs)
// costs at most a power-on to a running host after a restart, where
// clearing and writing it again every spell would cost two Status
// writes a spell, for ever
// (TestReview36z_RunningHostTransitioningRunsChurnUnsureSince).
func (c Config) saneClears(o Observed, st *Status) time.Duration {
	if o.Online && !st.Pending() {
		return c.SoftTimeout + c.StaleReads
	}
	return c.StaleReads
}

// unsureNote is how long a run of unsure readings lasts before it is
// persisted (Status.UnsureSince): half of SoftTimeout + StaleReads, at
// least StaleReads.
func (c Config) unsureNote() time.Duration {
	return max((c.SoftTimeout+c.StaleReads)/2, c.StaleReads)
}

// unsureLong reports whether a run of unsure readings (unsureRun) has
// lasted longer than any change of power takes (SoftTimeout, an OS
// shutdown, plus StaleReads): a BMC stuck on them shows nothing under
// way, and the host may be on or off.
func (c Config) unsureLong(run time.Duration) bool {
	return run >= c.SoftTimeout+c.StaleReads
}

// unsureWait is when to read again during a run of unsure readings:
// PollInterval, at most until the run becomes long (unsureLong).
func (c Config) unsureWait(run time.Duration) time.Duration {
	w := c.PollInterval
	if left := c.SoftTimeout + c.StaleReads - run; left > 0 {
		w = min(w, left)
	}
	return c.cap(w)
}

// calledInRun reports whether a call of action a made since the current
// run of unsure readings (unsureRun) began (Observed.LastCall, on the
// controller's clock) answers the run for now: accepted or not, it
// answers it for runBackoff, then the rule calls again. An accepted call
// answers it no longer than a failed one: a power-on the BMC accepted
// and dropped, or one that went to a host whose OS then powered off, and
// a power-off of a held host that someone powered on again later in the
// run, are followed by another
// (TestReview36y_ReleasedDroppedPowerOnOffForEver,
// TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver). A restart
// forgets the call and may answer the run once more.
func (c Config) calledInRun(o Observed, run time.Duration, a Action, now time.Time) bool {
	l := o.LastCall
	since := now.Sub(l.At)
	if l.Action != a || since < 0 || since >= run {
		return false
	}
	// The run was run-since long when the call returned.
	return since < c.runBackoff(l, run-since)
}

// runBackoff is how long a call answering a run of unsure readings that
// was runAt long when it returned answers it: until the run has doubled
// since, at most retryCap; at least twice SoftTimeout + StaleReads for
// an accepted power-on (it makes a soft power-off wait that long for
// its POST, poweringOn: one sent every few minutes to a host whose BMC
// reads Transitioning whatever it does would hold every soft reboot
// back), at least RetryDelay for one that failed or got no answer,
// which is tried again no later than SoftTimeout + StaleReads doubled
// with every such answer in a row before it (Call.Errors): a dead BMC
// whose every call times out is tried at run lengths about 1, 2, 4,
// 8... times the first (TestReview36x_FencedHostDeadBMCHammeredForEver).
// One that was busy and got an answer, or was refused before it was
// sent (Call.Fails zero: a 409, a refused login, a Pool's back-off; not
// a timeout), was not carried out and shows no dead BMC: it is tried
// again after RetryDelay doubled with every busy or failed answer in a
// row, at most ReissueAfter, whatever the run's length, so that two 409s
// do not keep a held host someone powered on running for a quarter of
// an hour (TestReview36ab_HeldHostOnStuckTwoBusyRunsTwelveMinutes), nor
// one busy answer after a run of hours a released host off for an hour
// (TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour). An accepted
// power-off powers nothing on: it answers the run for offRepeatCap
// only, so that a held host someone powers on late in a long run is
// powered off again within the bound the conformance kit checks
// (TestReview36z_HeldHostPoweredOnLateInLongNullRunRunsAnHour); and an
// accepted power-on (one that sets the power: never a press) powers
// nothing off, so it too answers the run for offRepeatCap only: a host
// with Online true powered off out of band late in a long run is
// powered on again within twice SoftTimeout + StaleReads, as doc.go says
// (TestReview36ae_IdleLongRunOutOfBandOffOffAnHour,
// TestReview36ae_GaveUpLongRunOutOfBandOffOffAnHour).
func (c Config) runBackoff(l Call, runAt time.Duration) time.Duration {
	if l.Class == power.ClassNone && (l.Action == ActionPowerOff || l.Action == ActionPowerOn) {
		return c.offRepeatCap()
	}
	if l.Class == power.ClassBusy && l.Fails == 0 {
		return min(c.RetryDelay<<min(max(l.Errors-1, 0), 16), max(c.ReissueAfter, c.RetryDelay))
	}
	return min(max(runAt, c.RetryDelay), (c.SoftTimeout+c.StaleReads)<<min(max(l.Errors-1, 0), 16), retryCap)
}

// retryCap bounds the back-off between calls answering one run of
// unsure readings (runBackoff): a BMC dead for good is tried at least
// once an hour.
const retryCap = time.Hour

// offRepeatCap bounds the wait before an accepted power-off of a host
// held off is repeated on unsure readings (runBackoff, and wait's
// doubling ReissueAfter, offRepeatWait): 2x(SoftTimeout + StaleReads),
// 7 minutes by default. A power-off powers nothing on, so it never waits
// longer: a host powered on meanwhile is powered off again within about
// that much.
func (c Config) offRepeatCap() time.Duration {
	return 2 * (c.SoftTimeout + c.StaleReads)
}

// offRepeatWait is how long an accepted power-off answers readings that
// say neither On nor Off (wait): ReissueAfter doubled with every repeat
// before it (Call.Repeats), at most offRepeatCap, so that a BMC that
// reads null for good but carries out every call is not sent a
// power-off (and its Status writes) every ReissueAfter for as long as
// the host is kept off
// (TestReview36z_OfflineNullSensorForceOffEveryMinuteForEver).
func (c Config) offRepeatWait(l Call) time.Duration {
	return min(c.ReissueAfter<<min(l.Repeats, 16), max(c.offRepeatCap(), c.ReissueAfter))
}

// offOver reports whether every power-off of ours that may have been
// carried out (Observed.SinceOff: a previous process's, a lost one's
// landing, included) is at least SoftTimeout + StaleReads old: an OS
// shutdown it began is over, and a power-on now cannot go to a host
// that then powers off. Before that, a Transitioning reading may be
// that shutdown under way, and a stuck rule's power-on waits
// (TestReview36y_WithdrawnSoftRebootPowerOnDuringShutdownOffForEver,
// TestReview36y_OnlineBackDuringOfflineShutdownOffForEver).
func (c Config) offOver(o Observed) bool {
	return o.SinceOff >= c.SoftTimeout+c.StaleReads
}

// releasedOn reports whether a host no hold keeps off is powered on
// after a long run (unsureLong) of Transitioning readings: never on an
// unknown reading, never by a power-on that may press the power button
// (OnToggles), never while a power-off of ours may still be under way
// (offOver), and not while a power-on answers the run (calledInRun).
func (c Config) releasedOn(o Observed, run time.Duration, now time.Time) bool {
	return o.Power == power.StateTransitioning && c.unsureLong(run) && !o.OnToggles && c.offOver(o) &&
		!c.calledInRun(o, run, ActionPowerOn, now)
}

// releasedPending reports whether a pending reboot whose evidence has
// not come ends as a released one (heldOff powers the host on): Online,
// no keyed request left (none was, or every one was withdrawn: keyed
// requests hold the host until they go), and a long run of
// Transitioning readings that releasedOn answers. A reboot with a bare
// request (Annotation) asks it only if a power-off of its own decided
// on an On or Off reading was accepted (Status.OffOnSane: the run
// began after that reading and after a power-off the BMC took, maybe
// because of it; a run under way before, or a power-off refused, shows
// nothing of it, and pending sends the power-off again,
// TestReview36z_BareRebootDoneWithoutPowerOff,
// TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff; bareStuck
// answers such a run), its latest power-off
// was accepted (Observed.LastCall, for this reboot: after a restart,
// pending sends it again) and it is over (offOver): a BMC stuck
// reading Transitioning while the host is off never gives the Off
// reading its evidence needs, and the reboot would stay pending, the
// host off, for good (TestReview36y_BareRebootOnStuckPoweringOffOffForEver).
// The readings are compared with nothing on a clock: a power-off
// repeated later in the run, a restart during it, a step of the wall
// clock change nothing
// (TestReview36aa_BareRebootStuckPoweringOffLostAnswerOffForEver,
// TestReview36aa_BareRebootStuckPoweringOffRestartOffForEver,
// TestReview36aa_BareRebootStuckPoweringOffClockBackOffForEver,
// TestReview36aa_BareWithFenceStuckPoweringOffOffForEver). Its
// annotation is removed and LastPoweredOn written as for a reboot
// done, though no Off reading showed it off: a BMC whose power-off job
// hangs (accepted, shown Transitioning for ever, never carried out)
// gives the same readings, and its reboot is so reported done though
// the host never went off (doc.go, Guarantees:
// TestReview36aa_BareRebootHungPoweringOffReportedDone).
func (c Config) releasedPending(o Observed, st *Status, run time.Duration, now time.Time, hasKeyed, none bool) bool {
	if hasKeyed || !o.Online || !c.releasedOn(o, run, now) {
		return false
	}
	if none {
		return true
	}
	if st.Mode == power.ModeSoft && c.softTimedOut(o, st.PendingRebootSince, st.SoftSince, now) {
		// The hard fallback is due: it goes out first, and the reboot
		// ends so only after it (TestReview36af_SoftIgnoredBareRebootDoneWithoutPowerOff).
		return false
	}
	l := o.LastCall
	return st.offOnSane() && l.Action == ActionPowerOff && l.Class == power.ClassNone && l.For.Is(st.work())
}

// offOnSane reports whether a power-off of the pending reboot decided
// on an On or Off reading was accepted (Status.OffOnSane, not an
// earlier reboot's).
func (s Status) offOnSane() bool {
	return !s.OffOnSane.IsZero() && !s.OffOnSane.Before(s.PendingRebootSince)
}

// noteSaneOff records, in the status written before a power-off of the
// pending reboot decided on reading state, whether it was decided on an
// On or Off reading (Status.OffOnSaneDecided): such a reading starts it
// (or keeps the earlier such decision's), one that says neither clears
// it, unless OffOnSane already holds for this reboot.
func (s *Status) noteSaneOff(state power.State, p time.Time) {
	switch {
	case s.offOnSane():
	case isUnsure(state):
		s.OffOnSaneDecided = time.Time{}
	case s.OffOnSaneDecided.IsZero() || s.OffOnSaneDecided.Before(s.PendingRebootSince):
		s.OffOnSaneDecided = p
	}
}

// confirmSaneOff moves Status.OffOnSaneDecided to OffOnSane once the
// last call (o.LastCall) shows the latest power-off of the pending
// reboot, decided on an On or Off reading, accepted: a power-off of
// this reboot, answered with no error, returned at or after the
// decision (every later power-off decision would have cleared or kept
// it). A call refused (busy, failed), or never made (a crash between
// the status write and the call: a restarted controller remembers no
// call), sets nothing (TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff).
// It reports whether it moved it (keepSaneOff may undo the move).
func (s *Status) confirmSaneOff(o Observed) bool {
	v, l := s.OffOnSaneDecided, o.LastCall
	if v.IsZero() || v.Before(s.PendingRebootSince) || l.Action != ActionPowerOff ||
		l.Class != power.ClassNone || !l.For.Is(s.work()) || l.At.Before(v) {
		return false
	}
	s.OffOnSane, s.OffOnSaneDecided = v, time.Time{}
	return true
}

// keepSaneOff undoes confirmSaneOff's move in d.Status (back to
// unmoved's OffOnSane and OffOnSaneDecided) if nothing else is to be
// written in this pass (no power call, no other change): the call stays
// in the controller's memory (Observed.LastCall) until its next call,
// whose versioned write, like any other write before, carries the move
// the next pass makes again. A pending reboot so costs no Status write
// of its own for it; a restart before any write forgets it (bareStuck
// then answers a long run of Transitioning readings).
func (d *Decision) keepSaneOff(o Observed, unmoved Status) {
	if d.UpdateStatus || d.Power != ActionNone || len(d.RemoveAnnotations) > 0 {
		return
	}
	alt := d.Status
	alt.OffOnSane, alt.OffOnSaneDecided = unmoved.OffOnSane, unmoved.OffOnSaneDecided
	if alt.Equal(o.Status) {
		d.Status = alt
	}
}

// stuckOff sets d to power a held host off after a long run of unsure
// readings (unsureLong): hard (the host is held, it must be off; soft on
// a BMC that answered hard unsupported), not while a press may still
// land (landWait), and only if it sets the power (a press needs an On
// reading that cannot be an echo, pressWait: it never powers a held host
// on). who says what holds the host, for the reason.
func (c Config) stuckOff(o Observed, now time.Time, who string, d *Decision) {
	send := c.offMode(o, power.ModeHard, now)
	if c.wait(o.LastCall, ActionPowerOff, send, now, o.Power, d) {
		return
	}
	if w, no := c.landWait(o); no {
		d.Reason = who + "; read " + o.Power.String() + " for long; a press whose answer was lost may still land: hold back the power-off until it has"
		d.RequeueAfter = c.cap(w)
		return
	}
	if _, no := c.pressWait(o, send); no {
		d.Reason = who + "; read " + o.Power.String() + " for long; the power-off presses the power button: wait for an On reading"
		return
	}
	d.sendOff(send, power.ModeHard)
	d.Reason = who + "; read " + o.Power.String() + " for long (may have been powered on): power off " + send.String() + " (powers nothing on)"
	d.RequeueAfter = c.QuickPoll
}

// freshOff reports whether this pass's reading is an Off that cannot
// echo a state from before this controller's last power-off or power-on:
// taken StaleReads after both (SinceOff, QuietFor), OffSettle into its
// run of Off readings.
func (c Config) freshOff(o Observed) bool {
	return o.Power == power.StateOff && o.OffFor >= c.OffSettle &&
		o.SinceOff >= c.StaleReads && o.QuietFor >= c.StaleReads
}
