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
// busy, whether or not its power state reads. Called with r.mu held.
func busy(h Host, d Decision, hm *memory, m, landing time.Duration) bool {
	switch {
	case d.Power != ActionNone, len(d.Requests) > 0,
		d.Phase != PhaseIdle && d.Phase != PhaseDeprovisioned:
		return true
	case statusBusy(h, d.Status):
		return true
	}
	return hm.callsMayLand(m, landing)
}

// storedBusy reports whether host h as stored shows work of this
// controller's under way, before any pass decides on it: a reboot
// request (an annotation p counts) or what statusBusy reads in its
// stored status. It is what a pass that read h and then failed reports
// (Result.Busy), and what Reconciler.Loop adds unlisted hosts by
// (HostLister).
func storedBusy(h Host, p Policy) bool {
	if statusBusy(h, h.Status) {
		return true
	}
	reqs, _ := parseInto(nil, nil, h.Annotations, p)
	return len(reqs) > 0
}

// statusBusy reports whether status st of host h shows work of this
// controller's under way: a pending reboot, Online=false whose
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
	switch {
	case st.Pending():
		return true
	case h.Deprovisioned:
		return false
	case !h.Online && (st.OfflineSince.IsZero() || st.OfflineOffSeen.IsZero()), h.Online && (!st.OfflineSince.IsZero() || !st.OfflineOffSeen.IsZero()):
		return true
	case !st.LastPoweredOn.IsZero() && !st.OnConfirmed.Equal(st.LastPoweredOn), !st.LastPress.IsZero():
		return true
	}
	return false
}

// callsMayLand reports whether a power-off or press of ours may still
// land at monotonic time m: one whose answer was lost, that this
// controller did not see answered, or that is still awaited (answered
// busy: it may go on in the background, LateAnswerer), less than landing
// ago, as the decisions count them (lostCalls.since).
func (h *memory) callsMayLand(m, landing time.Duration) bool {
	l := h.lost
	for _, a := range []lostAt{l.off, l.press, l.flight.off, l.flight.press} {
		if a.set && m-a.at < landing {
			return true
		}
	}
	return false
}
