package reboot

import "time"

// busy reports whether work of this controller's is under way for host h
// after a pass that decided d (Result.Busy, Next.Busy): a reboot request
// or a pending reboot, a host held off, a power call made in the pass,
// what statusBusy reads in the status decided, or a power-off or press
// whose answer was lost or is still awaited (hm, at monotonic time m)
// that may still land (landing: Config.LostLanding). It errs on the side
// of busy: an idle host (Online with no Online=false power-off of ours
// to undo, or Online=false and known off) or a deprovisioned one, with
// no request and nothing of ours in flight, is the only one it calls not
// busy, whether or not its power state reads. A power-off or press of
// ours whose answer was lost counts for LostLanding and then the OS
// shutdown it may start (Config.shutdownBound), whatever
// power-on of ours came after it
// (TestReview40bc_LostSoftOffLandsAfterOurPowerOnShutsDownLetGoOff). An
// Online host that a
// power-off of ours may still turn off (hm.offSent, no power-on of ours
// since, less than shutdownBound ago on the monotonic clock: a soft one's OS
// shutdown) is busy too: it may go off after this pass read it on, and
// the record may no longer say why (a wall clock stepped, the record
// wiped: TestReview40ba_OnlineBackDuringSoftOffWallClockStepLetGoOffForGood,
// TestReview40ba_RecordRecreatedDuringOurSoftOffLetGoOffForGood). Called
// with r.mu held.
// c is the host's Config (withDefaults, forHost).
func busy(h Host, d Decision, hm *memory, m time.Duration, c Config) bool {
	switch {
	case d.Power != ActionNone:
		return true
	case offlineHeldDone(h, d.Status, d.Requests):
		// Only the bare annotation's end and the power-on are left, for
		// when Online is true again.
	case len(d.Requests) > 0, d.Phase != PhaseIdle && d.Phase != PhaseDeprovisioned:
		return true
	}
	return statusBusy(h, d.Status) || hm.mayChangeFor(h, c, m)
}

// othersMayLand reports whether a power call of another process's may
// still land at monotonic time m, or a shutdown it started still run: one
// sent by the process that ran before this Reconciler started, or by the
// leader before this one began to lead (leadAt, noteHold: its first
// Hold that succeeded after a refusal or its start, not counting a
// refusal inside its lease's margin when the Guard is a GuardTerm, or a
// success in a new Term), whose answer was lost (A5). Such a call may land
// until LostLanding after that start, and a power-off's OS shutdown run
// shutdownBound more (c: the
// host's Config, withDefaults and forHost). Neither this process's memory
// nor the record tells which hosts it was sent to: the record may have
// been wiped or re-created since
// (TestReview40bd_ModelNewSeedLostCallLandsAfterRecreateOnlineLetGo), so
// every host counts as busy until then. The window counts from the first
// pass that read a host's memory, or the first time this is asked if
// earlier (began: a pass whose every try fails before it reads a host's
// memory, a Power factory that fails, begins it too); no earlier than the
// start. r.mu must be held.
func (r *Reconciler) othersMayLand(m time.Duration, c Config) bool {
	if !r.begun {
		r.begun, r.began = true, m
	}
	return m-max(r.began, r.leadAt) < c.LostLanding+c.shutdownBound()
}

// mayChangeFor is mayChange for host h under its Config c (withDefaults,
// forHost): a deprovisioned host is not ours to power on.
func (h *memory) mayChangeFor(host Host, c Config, m time.Duration) bool {
	return h.mayChange(host.Online && !host.Deprovisioned, m, c.LostLanding, c.shutdownBound())
}

// mayChange reports whether what this Reconciler did or read may still
// change host power (online: its record's Online) at monotonic time m,
// whatever its record says: a call of ours that may land, and its
// shutdown (callsMayLand), or for an Online host a power-off of ours
// that may still turn it off (shutdownMayRun) or a power-on it is owed
// (owesOn).
func (h *memory) mayChange(online bool, m, landing, shutdown time.Duration) bool {
	return h.callsMayLand(m, landing+shutdown) ||
		online && (h.shutdownMayRun(m, shutdown) || h.owesOn(m, landing+shutdown))
}

// owesOn reports whether an Online host is owed a power-on by what this
// Reconciler read at monotonic time m: its last On or Off reading said
// Off, and no run of unknown readings has lasted window since (a BMC
// dead that long is let go: the package doc's idle host whose BMC is
// dead). A pass that waits to power it on (a reading that may echo, a
// press that may still land) or reads it unknown for a while keeps it
// (TestReview40bc_LostOfflinePowerOffLandsAfterOnlineTrueUnknownReadingLetsGoOff).
func (h *memory) owesOn(m, window time.Duration) bool {
	return h.sawOff && !(h.unknownRun && m-h.unknownSince >= window)
}

// shutdownMayRun reports whether a power-off of ours may still turn the
// host off at monotonic time m: one returned less than shutdown ago with
// no power-on of ours sent since.
func (h *memory) shutdownMayRun(m, shutdown time.Duration) bool {
	return h.offSet && !h.onSince && m-h.offSent < shutdown
}

// offlineHeldDone reports whether host h, whose record says Online=false
// (not deprovisioned), has a pending reboot with nothing left to do while
// Online stays false: its power-off known done after every request seen
// (Status.Covers), the hold never broken since (Status.HoldBroken), no
// power-on of this reboot's decided on a stuck BMC (StuckOnDecided,
// StuckGaveUp), and no request but the bare one (reqs): a keyed request is
// a client's hold, which the controller keeps watching. What is left (the
// bare annotation's removal and the power-on) waits for Online to be true
// again, when the stored record shows it (storedBusy) and a HostLister
// lists the host again
// (TestReview40az_ReleasedFenceUnderOnlineFalseNeverForgotten).
func offlineHeldDone(h Host, st Status, reqs []Request) bool {
	if h.Online || h.Deprovisioned || !st.Covers() || st.HoldBroken.After(st.LastPoweredOff) ||
		!st.StuckOnDecided.Before(st.PendingRebootSince) || !st.StuckGaveUp.Before(st.PendingRebootSince) {
		return false
	}
	for _, r := range reqs {
		if r.Keyed() {
			return false
		}
	}
	return true
}

// storedBusy reports whether host h as stored shows work of this
// controller's under way, before any pass decides on it: a reboot
// request (an annotation p counts) or what statusBusy reads in its
// stored status. It is what a pass that read h and then failed reports
// (Result.Busy), and what Reconciler.Loop adds unlisted hosts by
// (HostLister).
func storedBusy(h Host, p Policy) bool {
	reqs, _ := parseInto(nil, nil, h.Annotations, p)
	if len(reqs) > 0 && !offlineHeldDone(h, h.Status, reqs) {
		return true
	}
	return statusBusy(h, h.Status)
}

// statusBusy reports whether status st of host h shows work of this
// controller's under way: a pending reboot (under Online=false, not once
// its power-off is known done with nothing left but what waits for
// Online: offlineHeldDone), Online=false whose
// enforcement has not begun (OfflineSince zero: OfflineOffSeen alone is
// the power-on owed of an earlier Online=false, not a power-off of this
// one, TestReview40ar_OwedMarkerHidesOnlineFalseFromHostLister; idle
// begins it, already done, for a host that reads Off by a reading that
// cannot echo, TestReview40as_OnlineFalseHostAlreadyOffNeverForgotten) or
// whose power-off is not yet known done (Status.OfflineOffSeen), Online true
// again after an Online=false enforcement whose power-on is not yet
// decided (OfflineSince still set, or OfflineOffSeen, which idle keeps
// as the power-on owed once Online is true, until the power-on is
// decided or the host reads on), a power-on decided and not yet confirmed
// (Status.OnConfirmed; also under Online=false, where the host held off
// never confirms it: whether it may still land cannot be told from the
// record, nor after a restart, so such a host is held, and kept off,
// until Online is true again or its record is deleted), or a press that
// may still be in effect
// (Status.LastPress). For a Deprovisioned host only a pending reboot
// counts (in a record no pass has settled yet): it is not ours to power
// on, and deprovision decides no power call, so it never confirms a
// power-on nor clears a press
// (TestReview40ap_DeprovisionedUnconfirmedHostPolledForEver); a call of
// ours that may still land is what busy's memory tells.
func statusBusy(h Host, st Status) bool {
	pending := st.Pending()
	switch {
	case pending && !offlineHeldDone(h, st, nil):
		return true
	case h.Deprovisioned:
		return false
	case pending:
		// Known off for a pending reboot under Online=false: only what
		// may still land (below) is left.
	case !h.Online && (st.OfflineSince.IsZero() || st.OfflineOffSeen.IsZero()), h.Online && (!st.OfflineSince.IsZero() || !st.OfflineOffSeen.IsZero()):
		return true
	}
	return !st.LastPoweredOn.IsZero() && !st.OnConfirmed.Equal(st.LastPoweredOn) || !st.LastPress.IsZero()
}

// callsMayLand reports whether a power call of ours may still land at
// monotonic time m: a power-off, press or power-on whose answer was lost
// (a power-on so kept even once the record no longer shows it: wiped or
// re-created, TestReview40bb_LostPowerOnThenRecordRecreatedOfflineLetGoRunsUnderOnlineFalse), that this
// controller did not see answered, or that is still awaited (answered
// busy: it may go on in the background, LateAnswerer), less than landing
// ago, as the decisions count them (lostCalls.since).
func (h *memory) callsMayLand(m, landing time.Duration) bool {
	l := h.lost
	for _, a := range []lostAt{l.off, l.press, l.flight.off, l.flight.press, h.onLost} {
		if a.set && m-a.at < landing {
			return true
		}
	}
	return false
}
