package reboot

import "time"

// This file keeps the persisted bound on the power-offs and presses that
// may still land (Status.ActingSince): the instant by which every
// power-off (a press included) decided for the host had returned, written
// only while none is under way, cleared by the write before every
// power-off. A restarted controller, or one that leads again, counts the
// calls the status shows from it (plus LostLanding, A5), not from its own
// start or leadership, so restarts and lease hiccups do not put a press
// off for ever (TestReview36o_RestartEveryThreeMinutesNeverReboots,
// TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots).

// stampedAfter reports whether a timestamp v, truncated to precision, may
// have been read from a clock after wall: the value it was truncated from
// is up to precision later (a LastPress written by a pass that read its
// clock up to precision after wall reads no later than wall).
func stampedAfter(v, wall time.Time, precision time.Duration) bool {
	return !v.IsZero() && v.Add(precision).After(wall)
}

// actedBound converts a Status.ActingSince to the monotonic clock: set
// when the controller knows its start on both clocks (start, startWall).
// precision is Config.Precision: the stored ActingSince is truncated to
// it, so the calls it bounds returned up to precision after it
// (TestReview36o_ActingSinceTruncatedCountsLostPressEarly).
type actedBound struct {
	set       bool
	start     time.Duration // monotonic
	startWall time.Time
	precision time.Duration
	// now is the pass's wall clock and shutdown how long after its
	// first soft power-off an ended Online=false enforcement's OS
	// shutdown may run (offlineOffRecent): 2x SoftTimeout + StaleReads.
	now      time.Time
	shutdown time.Duration
	// nowMono is the pass's monotonic clock, read with now (when both are
	// set, bound also converts from now: see bound).
	nowMono time.Duration
}

// offlineOffRecent reports whether st shows an Online=false enforcement
// that ended (OfflineSince cleared: Online is true again) and whose soft
// power-off may still be under way: its first one (OfflineSoftSince) was
// decided less than b.shutdown ago (the last soft one is decided at most
// SoftTimeout after it, and its OS shutdown runs at most SoftTimeout +
// StaleReads). A restarted controller, or a new leader, counts it as a
// power-off sent (SinceOff), so a stuck rule's power-on waits for its
// shutdown (offOver) rather than go to the running host
// (TestReview36z_RestartAfterOnlineBackDuringShutdownOffAnHour,
// TestReview36zFix_RestartAfterOnlineBackSlowShutdownOffAnHour).
func (b actedBound) offlineOffRecent(st Status) bool {
	v := st.OfflineSoftSince
	return b.shutdown > 0 && st.OfflineSince.IsZero() && !v.IsZero() && b.now.Sub(v) < b.shutdown
}

// bound returns when (monotonic) every power-off and press that st shows
// had returned, by its ActingSince, and whether st says so: not if it has
// no ActingSince, or a LastPress later than it (a press decided after it;
// the write that records a press clears it), or if its Status.Format
// is below 1. An older version's ActingSince does not mean this: one
// (review 36 round 14) wrote its process's start there and never cleared
// it, and no power-on of it wrote LastPress, so a press such a status
// hides (Status.hidesPress) may have been decided long after it
// (TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress,
// TestReview36t_TrackerUpgradeOldActingSinceBoundsHiddenPowerOnPress).
// Nothing in an old status tells that version from later ones that
// cleared it before every call, so none is trusted: after an upgrade, the
// calls an old status shows count from the first pass (plus LostLanding,
// A5).
func (b actedBound) bound(st Status) (time.Duration, bool) {
	v := st.ActingSince
	if !b.set || v.IsZero() || st.Format < formatPresses || st.LastPress.After(v) {
		return 0, false
	}
	at := b.start - b.startWall.Sub(v)
	if !b.now.IsZero() {
		// Also from now: a wall clock wrong at the start and stepped
		// since would move the start's conversion early (the calls
		// counted as long returned); each errs only late but for its
		// own fault, so the later of the two (as quietSince).
		at = max(at, b.nowMono-b.now.Sub(v))
	}
	return at + b.precision, true
}

// quietBy notes, in a first pass after a restart, that every power-off
// and press a previous process sent had returned by at (monotonic), as
// the status's ActingSince v says: they count from then, if earlier than
// the start.
func (h *memory) quietBy(at time.Duration, v time.Time) {
	o := &h.off
	if at >= o.lastOff {
		return
	}
	o.lastOff, o.lastPress = at, min(o.lastPress, at)
	h.quiet, h.quietMono, h.quietWall = true, at, v
}

// quietSince returns Observed.ActingSince: the wall clock by which every
// power-off and press that may still be in effect had returned, as far as
// this memory knows (off.lastOff: its own calls' returns, and what it
// counted of other processes' and leaders'); zero while a call may still
// be running in the background (a late answer will say when it ended).
// lastOff, a monotonic time, is written on the wall clock twice: from the
// start (start on the monotonic clock, startWall on the wall clock), which
// a wall-clock step since does not move, and back from now (nowMono,
// nowWall), which a monotonic clock stopped since the start (a suspended
// host, a paused VM: the wall clock ran on) does not move back; the later
// of the two, since each errs only late but for its own fault.
func (h *memory) quietSince(start time.Duration, startWall time.Time, nowMono time.Duration, nowWall time.Time) time.Time {
	if h.lost.flight.off.set {
		return time.Time{}
	}
	if h.quiet && h.off.lastOff <= h.quietMono {
		return h.quietWall // the status's own value, not rounded up again
	}
	fromStart := startWall.Add(h.off.lastOff - start)
	if nowWall.IsZero() {
		return fromStart
	}
	return maxTime(fromStart, nowWall.Add(h.off.lastOff-nowMono))
}

// lead notes that this controller's leadership began at m after it stood
// by: a power-off, press or power-on that a status read while standing by
// showed counts as sent at m, if later (its sender's lease, which bounds
// the call, ended before m), or at the bound the latest such status gave
// (heard.by, Status.ActingSince), if earlier; then the first pass that
// leads checks that no other leader wrote since (checkActing).
func (h *memory) lead(m time.Duration) {
	o := &h.off
	if h.heard.on {
		h.lastOn = max(h.lastOn, m)
	}
	at := m
	if h.heard.bySet && h.heard.by < m && (h.heard.off || h.heard.press) {
		at = h.heard.by
		h.checkActing, h.leadActing = true, h.heard.byWall
	}
	if h.heard.off {
		o.noOff, o.lastOff = false, max(o.lastOff, at)
		if o.lastOff == at && at < m {
			h.quiet, h.quietMono, h.quietWall = true, at, h.heard.byWall
		}
	}
	if h.heard.press && at > o.lastPress {
		*o = offState{lastOff: o.lastOff, lastPress: at}
	}
	// Another leader's calls: their answers may have been lost (A5).
	h.lost.unseen(h.heard.off, h.heard.lostPress, at)
	h.heard = heard{}
}
