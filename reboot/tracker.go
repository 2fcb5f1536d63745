package reboot

import (
	"errors"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Tracker keeps what Decide needs remembered about one host between
// passes, for a caller that runs Decide itself instead of the Reconciler
// (as raft's RawNode keeps its core's inputs): the caller reports what it
// read and what it did, and Observe fills every Observed field that needs
// memory on a monotonic clock. The Reconciler keeps the same memory with
// the same helpers (reading, writing, wrote, called, sawState, sendingOff,
// sentOff below; sinceOff in reconciler.go), so the two fill every field alike.
//
// One pass with a Tracker is: read the host record, read the controller's
// clock and monotonic clock, read the power state (in that order: the
// evidence a reading gives is stamped no later than the reading) and the
// monotonic clock again once that read returned (Reading.ReadEnd), call
// Observe, Decide, write the decision's Status if asked (calling Writing
// just before the write) and call Applied once the write succeeded (or at
// once if none was asked), then call Sending just before a power call and
// Sent, with its error and the monotonic clock read once it returned, when
// it returns. A pass whose write failed calls neither Applied nor a power
// call: the next pass reads again.
//
// A Tracker is for one host and one goroutine at a time. Its memory lives
// in the process only; losing it (a restart, a new Tracker, Forget) is
// always safe: every duration it fills then counts from the new start, and
// the record counts as changed. The zero Tracker starts at its first
// Observe; NewTracker gives an earlier start (the process's), which lets
// values read in the first pass count from that start.
type Tracker struct {
	started   bool
	start     time.Duration
	startWall time.Time
	mem       memory
	// the pass in progress: its monotonic time, the version read and the
	// Observed filled.
	m       time.Duration
	version string
	o       Observed
	// work: the For of the pass's decision (Applied), given to its call
	// (Sent) if the caller gave none.
	work Work
	// the power call in progress (between Sending and Sent, inCall):
	// whether it may press the power button, and the power-off memory
	// before it.
	inCall bool
	press  bool
	was    offState
	// onPress: the power-on announced by Sending may press the power
	// button (the last Reading's OnToggles).
	onPress bool
	// standby: Standby was called, and Leading not since.
	standby bool
	// leadAt is the mono of the Leading call that last began the
	// leadership (zero if none).
	leadAt time.Duration
	// tog: the Toggles answers of the last Reading (kept across Forget,
	// for Late: a press still in flight may answer after it).
	tog toggleAnswers
	// act: when the caller's controller started (kept across Forget):
	// the clocks Status.ActingSince is converted with.
	act acting
}

// acting is when a controller started: start on the monotonic clock,
// wall on the wall clock.
type acting struct {
	start time.Duration
	wall  time.Time
}

// bound is the actedBound of a controller that started at a, whose
// timestamps are truncated to precision.
func (a acting) bound(c Config, now time.Time, nowMono time.Duration) actedBound {
	return actedBound{set: true, start: a.start, startWall: a.wall, precision: c.Precision,
		now: now, nowMono: nowMono, shutdown: c.shutdownBound()}
}

// toggleAnswers are a Reading's SoftToggles, HardToggles and OnToggles; known is
// false before any Reading.
type toggleAnswers struct{ known, soft, hard, on bool }

// pressedOn reports whether a power-on may have pressed the button:
// unknown answers count as a press.
func (a toggleAnswers) pressedOn() bool { return !a.known || a.on }

// pressed reports whether a power-off in mode m may have pressed the
// button: unknown answers count as a press.
func (a toggleAnswers) pressed(m power.Mode) bool {
	if !a.known {
		return true
	}
	if m == power.ModeHard {
		return a.hard
	}
	return a.soft
}

// NewTracker returns a Tracker whose controller started at start on its
// monotonic clock, when its wall clock read startWall: what this process
// did to the host before start is unknown, what it did since is reported
// to the Tracker.
func NewTracker(start time.Duration, startWall time.Time) *Tracker {
	return &Tracker{started: true, start: start, startWall: startWall,
		mem: *newMemory(start), act: acting{start: start, wall: startWall}}
}

// Reading is what the caller read in one pass.
type Reading struct {
	// Host is the host record as read from the store. Version, Annotations,
	// Online, Deprovisioned, Status, StaleReads and OffSettle are used.
	Host Host
	// Power is the power state read after Now and Mono (StateUnknown if
	// the read failed).
	Power power.State
	// Now is the controller's wall clock and Mono its monotonic clock
	// (one that never jumps), both read before Power.
	Now  time.Time
	Mono time.Duration
	// ReadErr is what the power state read returned: one that got an
	// answer after one that got none (a timeout, a lost connection) ends
	// the back-off of power calls that got none (Call.Fails).
	ReadErr error
	// ReadEnd is the monotonic clock read once the power state read
	// returned; a value before Mono (zero, say) counts as Mono. It dates
	// the end of a press's shutdown (Observed.PressOverFor).
	ReadEnd time.Duration
	// SoftToggles and HardToggles are the power controller's
	// Toggler.TogglesOff answers (false if it is no Toggler).
	SoftToggles, HardToggles bool
	// OnToggles is the power controller's OnToggler.TogglesOn answer
	// (false if it is no OnToggler): a power-on whose answer was lost
	// then counts as a press (Sent).
	OnToggles bool
}

// Observe starts a pass: it returns the Observed to give Config.Decide,
// with cfg the Config that will decide (only its OffSettle and StaleReads
// are read, with the host's overrides). Fields, and where they come from:
//
//   - Annotations, Online, Deprovisioned, Status, StaleReads, OffSettle:
//     copied from rd.Host. Power, SoftToggles, HardToggles: from rd.
//   - LastCall: the call last reported to Sent (or Late), with Repeats counting the
//     same action and mode sent in a row before it (zero before any),
//     Errors the calls busy or failed in a row, and Fails the calls in a
//     row that got no answer (a timeout, a lost connection), set to zero
//     by any answer, or by a reading whose rd.ReadErr got one after one
//     whose did not.
//   - QuietFor: Mono since the last Sending of a power-on, or since the
//     start if none; or since the pass that first read a
//     Status.LastPoweredOn this Tracker neither wrote (Writing) nor read
//     before, if later (another leader's power-on; in the first pass,
//     only one stamped after the start's wall clock). After Standby and
//     until Leading, any LastPoweredOn counts as sent at every pass;
//     Leading(mono) then counts it as sent at mono, if later.
//   - SinceOff: Mono since the last power-off that may have been carried
//     out (one whose Sent error says it was refused before it reached the
//     hardware, an auth failure (power.ErrAuth), a back-off
//     (power.ErrBackoff), a call never sent (power.ErrNotSent) or a lost
//     leadership (ErrNotLeader), does not count) returned: since the
//     doneMono of its Sent, or the mono of its Late answer, the latest it
//     may have reached the hardware (since its Sending until then); or
//     since the start if none, or since the wall clock Status.ActingSince
//   - Config.Precision (placed by the start's clocks) read in the first
//     pass, if earlier; unbounded if none was sent and the Status
//     read in the first pass shows no power-off under way (no reboot pending, no
//     Online=false being enforced, nor one ended whose first soft
//     power-off, Status.OfflineSoftSince, is less than 2x SoftTimeout +
//     StaleReads old) and Forget was not called. In a later
//     pass, a Status that shows a power-off with values this Tracker
//     neither wrote (Writing) nor read before (a PendingRebootSince,
//     OfflineSince or LastPress of another leader's) counts as a
//     power-off sent at that pass, if later. After Standby and until
//     Leading, any of them counts as sent at every pass, and
//     Leading(mono) then counts it as sent at mono, if later (for
//     SincePress too), unless the Status read last while standing by has
//     an ActingSince: then from that (and the first pass after Leading
//     counts them from itself if ActingSince changed since). A power-off whose Sent error says its answer was
//     lost (no protocol status, neither a refusal before sending nor
//     unsupported), and one this Tracker did not see answered (counted
//     from the start, from a later pass or from Leading as above), counts
//     as sent Config.LostLanding after that (assumption A5, doc.go), as
//     does a press (SincePress); a Late answer settles only the call in
//     flight it is taken for.
//   - SincePress: the same for power-offs that may press the power button
//     (sent in a mode whose Toggles answer of that pass was true); also
//     unbounded only if the first pass's Status has no LastPress, and
//     counted from this pass if that LastPress is later than the start's
//     wall clock less Config.Precision (may have been written after the
//     start); in a later pass, a LastPress
//     it neither wrote nor read before counts as a press sent at that
//     pass, and what was known of its own presses' shutdown is dropped.
//   - PressOver: an unbroken run (unknown readings do not break it) of
//     Off readings, each taken (Mono) at least StaleReads after the last
//     press's Sent returned success, lasting at least OffSettle, was seen
//     since that press; PressOverFor is Mono since the ReadEnd of the
//     reading that completed the first such run.
//   - SincePending, SinceRequest, SinceRewrite, SinceLastRewrite: Mono
//     since the Tracker first knew the current Status.PendingRebootSince,
//     LastRequestSeen, RewriteSeen and LastRewriteSeen: since the pass
//     whose write (Applied) set it, or the pass that first read it, or
//     the start for a value read in the first pass and stamped before the
//     start's wall clock (a later one was written after the start).
//   - OffFor: Mono since the latest Off reading at least OffSettle old
//     that was followed only by Off or unknown readings, this one
//     included; zero unless Power is Off.
//   - UnknownFor: Mono since the first of the current unbroken run of
//     unknown readings; zero unless Power is unknown.
//   - UnsureFor: the same for readings neither On nor Off (unknown or
//     transitioning); zero if Power is On or Off.
//   - SaneFor: the same for readings On or Off; zero unless Power is
//     On or Off.
//   - UnsureWhole: Power is unknown or transitioning and an On or Off
//     reading came before its run, since the start (or Forget).
//   - Changed: rd.Host.Version was not handled lately (by Applied), or
//     this is the first pass.
//   - HardUnsupportedAt: the At of the latest hard power-off reported to
//     Sent whose class was unsupported or none, if unsupported (zero
//     before any).
func (t *Tracker) Observe(rd Reading, cfg Config) Observed {
	m, h := rd.Mono, rd.Host
	if !t.started {
		*t = Tracker{started: true, start: m, startWall: rd.Now, standby: t.standby, leadAt: t.leadAt,
			mem: *newMemory(m), act: t.act}
		t.act.start, t.act.wall = m, rd.Now
	}
	t.tog = toggleAnswers{known: true, soft: rd.SoftToggles, hard: rd.HardToggles, on: rd.OnToggles}
	// A pass whose clocks were read before the leadership began (Leading
	// was called with a later mono: a caller that shares one Guard among
	// its hosts' Trackers tells them all when any Hold begins it) read its
	// status while another leader's calls could still land: it is a
	// standby pass, and what it reads counts as sent at that Leading.
	leadLate := !t.standby && m < t.leadAt
	standby := t.standby || leadLate
	hm := &t.mem
	first := !hm.known
	hm.known = true
	hm.readAnswered(rd.ReadErr)
	fromStart := first && !hm.forgot
	since := func(a *anchors, v time.Time) time.Duration {
		return a.since(v, m, t.start, fromStart && !v.After(t.startWall))
	}
	o := Observed{
		Annotations:       h.Annotations,
		Online:            h.Online,
		Deprovisioned:     h.Deprovisioned,
		Status:            h.Status,
		Power:             rd.Power,
		LastCall:          hm.last,
		QuietFor:          hm.quietFor(first, h.Status, m, fromStart && h.Status.LastPoweredOn.After(t.startWall), standby),
		SincePending:      since(&hm.pend, h.Status.PendingRebootSince),
		SinceRequest:      since(&hm.req, h.Status.LastRequestSeen),
		SinceRewrite:      since(&hm.rew, h.Status.RewriteSeen),
		SinceLastRewrite:  since(&hm.lastRew, h.Status.LastRewriteSeen),
		Changed:           !hm.seenVersion(h.Version) || first,
		StaleReads:        h.StaleReads,
		OffSettle:         h.OffSettle,
		SoftToggles:       rd.SoftToggles,
		HardToggles:       rd.HardToggles,
		OnToggles:         rd.OnToggles,
		HardUnsupportedAt: hm.hardUnsupportedAt,
	}
	hc := cfg.withDefaults().forHost(Observed{StaleReads: h.StaleReads, OffSettle: h.OffSettle})
	o.SinceOff, o.SincePress = hm.sinceOff(first, h.Status, m, fromStart && stampedAfter(h.Status.LastPress, t.startWall, hc.Precision),
		standby, rd.OnToggles, t.act.bound(hc, rd.Now, m))
	if !standby {
		o.ActingSince = hm.quietSince(t.act.start, t.act.wall, m, rd.Now)
	}
	o.SinceOff, o.SincePress = hm.lost.since(o.SinceOff, o.SincePress, m, hc.LostLanding)
	o.PressOver, o.PressOverFor = hm.sawState(rd.Power, m, max(rd.ReadEnd, m), hc.StaleReads, hc.OffSettle)
	o.OffFor, o.UnknownFor, o.UnsureFor, o.SaneFor = hm.reading(rd.Power, m, hc.OffSettle)
	o.UnsureWhole = hm.unsureRun && hm.unsureWhole
	if leadLate {
		hm.lead(t.leadAt)
	}
	t.m, t.version, t.o = m, h.Version, o
	return o
}

// Writing reports that the pass's decision d is about to be written to
// the store: call it just before the write of d.Status (it does nothing
// if d.UpdateStatus is false). From then on the values it writes count
// as this controller's own, whatever the write returns: a write whose
// answer timed out may have been applied, and the next pass must not take
// its LastPress (or pending reboot, OfflineSince, LastPoweredOn) for
// another leader's (see Observe: SinceOff).
func (t *Tracker) Writing(d Decision) {
	if d.UpdateStatus {
		t.mem.writing(d.Status)
	}
}

// Applied reports that the pass's decision d was applied to the store:
// its Status written (written is the record's new version), or no write
// was asked (written is ignored). Not calling it after a failed write is
// safe: the record then counts as changed in the next pass.
func (t *Tracker) Applied(d Decision, written string) {
	hm := &t.mem
	t.work = d.For
	hm.noteVersion(t.version)
	if d.UpdateStatus {
		hm.noteVersion(written)
		hm.wrote(t.o, d.Status, t.m)
	}
}

// Sending reports that the pass's power call of action a, in mode m for a
// power-off, is about to be made, at mono on the monotonic clock. Call it
// just before the call: from then on an Off reading may echo the state
// before a power-on, and a shutdown may start, whatever the call returns.
// A power-off counts as a press of the power button if the last Reading
// said mode m toggles (SoftToggles or HardToggles), even after a Forget
// in the same pass, or if no Reading was given yet
// (TestReview36l_TrackerForgetBeforeSendingDropsPress).
func (t *Tracker) Sending(a Action, m power.Mode, mono time.Duration) {
	switch a {
	case ActionPowerOn:
		t.mem.lastOn = max(t.mem.lastOn, mono)
		t.onPress = t.tog.pressedOn()
	case ActionPowerOff:
		t.inCall, t.press = true, t.tog.pressed(m)
		t.was = t.mem.sendingOff(t.press, mono)
	}
}

// Sent reports the outcome of the power call announced by Sending: c is
// the call (Repeats is ignored; At, the controller's clock once it
// returned, must be set; For, if zero, is taken from the decision given
// to Applied: a failed soft power-off escalates only the work it was
// decided for, see Observed.LastCall), err what it returned and
// doneMono the monotonic clock read once it returned. A power-off refused
// before it reached the hardware (err wrapping power.ErrAuth, power.ErrBackoff,
// power.ErrNotSent or ErrNotLeader) is undone as if never sent; a press
// that returned success is what a later Off reading can show over
// (PressOver); a hard power-off answered unsupported sets
// HardUnsupportedAt (c.At), one accepted clears it. Sent returns c with
// Repeats filled; the next Observe gives it as LastCall.
func (t *Tracker) Sent(c Call, err error, doneMono time.Duration) Call {
	switch c.Action {
	case ActionPowerOff:
		t.mem.sentOff(t.was, t.press, err, doneMono)
	case ActionPowerOn:
		t.mem.sentOn(t.onPress, err, doneMono)
	}
	t.inCall, t.press, t.onPress, t.was = false, false, false, offState{}
	if c.For == (Work{}) {
		c.For = t.work
	}
	return t.mem.answered(c, err)
}

// Late reports the answer a of a power call that came after the pass that
// made it had reported it to Sent as busy (see LateAnswerer), taken at now
// on the controller's clock and at mono on its monotonic clock (read once
// the answer was taken): call it before the next Observe. It records the
// answer's class as Sent does (LastCall, HardUnsupportedAt), and a
// power-off that may have been carried out as sent at mono (SinceOff), a
// press (one reported to Sent busy since the last late power-off, or a
// mode the last Reading said toggles, or any power-off if no Reading was
// given yet) as a press sent at mono whose shutdown is not known over
// (SincePress, PressOver). The Call recorded, which it returns, has At
// now and For the work of the calls reported to Sent busy since the
// previous late answer (unknown if none, or if they were decided for
// different work): a soft power-off that failed late escalates only the
// work it was decided for, and one of unknown work (made before this
// Tracker started, say) none. Forget keeps what Late needs of the calls
// still in flight (the Toggles answers of the last Reading, the calls
// reported busy).
func (t *Tracker) Late(a LateAnswer, now time.Time, mono time.Duration) Call {
	press := a.Action == ActionPowerOff && t.tog.pressed(a.Mode) || a.Action == ActionPowerOn && t.tog.pressedOn()
	return t.mem.late(a, now, mono, press)
}

// Forget drops what the Tracker knows, at mono on the monotonic clock, as
// a restart would: the host counts as possibly powered on and off just
// now, its values as known from now, and its record as changed. What
// Late needs of the calls still in flight is kept: such a call's late
// answer, reported after Forget, counts as a press if the call may have
// been one (TestReview36i_TrackerForgetThenLatePressIsNoPress). A
// power-off announced by Sending and not yet reported to Sent counts, once
// Sent reports it, from its return, as in a Tracker never forgotten (a
// refused one changes nothing of the new memory).
func (t *Tracker) Forget(mono time.Duration, now time.Time) {
	nt := Tracker{started: true, start: mono, startWall: now, standby: t.standby, leadAt: t.leadAt,
		mem: *t.mem.forgotten(mono), tog: t.tog, onPress: t.onPress, act: t.act}
	if t.inCall {
		nt.inCall, nt.press, nt.was, nt.work = true, t.press, nt.mem.off, t.work
	}
	*t = nt
}

// Standby reports that the caller's controller does not hold its
// leadership (its Guard refused a Hold), or has not asked yet: a caller
// fenced by a Guard calls it before its first Observe. Until Leading, every
// power-off, press and power-on the Status read shows counts as sent at
// that pass, at every pass (another leader writes its value before it
// sends the call, which may land until its lease ends: after this read).
// A caller that needs no Guard (the only controller by construction) never
// calls it: the Tracker then leads from its start.
func (t *Tracker) Standby() { t.standby = true }

// Leading reports a Hold of the caller's Guard that succeeded, at mono on
// the monotonic clock (read once it returned): call it after every
// successful Hold (it does nothing unless Standby was called since the
// last one). The first after Standby begins the leadership: what passes
// read while standing by counts as sent at mono, if later (the Guard
// promises the previous leader's calls are over by then), and so does
// what a later Observe reads whose Reading.Mono is before mono (its pass
// read its clocks before the leadership began: a caller that shares one
// Guard among its hosts' Trackers may tell them all at once). The Reconciler
// asks its Guard at the start of every pass and before every write and
// power call, and reports each answer so.
func (t *Tracker) Leading(mono time.Duration) {
	if t.standby {
		t.standby, t.leadAt = false, mono
		t.mem.lead(mono)
		if !t.mem.known {
			// No pass yet: the host is first read once the caller leads,
			// so another leader's press, power-off and power-on count
			// from here, not from the start (as the Reconciler's leadAt).
			h := &t.mem
			h.lastOn, h.off.lastOff, h.off.lastPress = max(h.lastOn, mono), max(h.off.lastOff, mono), max(h.off.lastPress, mono)
		}
	}
}

// reading notes a power reading at m and returns Observed.OffFor,
// UnknownFor, UnsureFor and SaneFor.
func (h *memory) reading(state power.State, m, settle time.Duration) (offFor, unknownFor, unsureFor, saneFor time.Duration) {
	switch state {
	case power.StateOff:
		h.offRun = append(h.offRun, m)
		for len(h.offRun) > 1 && m-h.offRun[1] >= settle {
			h.offRun = h.offRun[1:]
		}
		offFor = m - h.offRun[0]
	case power.StateUnknown:
		// Neither on nor off: the run goes on, but this reading adds nothing.
		if !h.unknownRun {
			h.unknownRun, h.unknownSince = true, m
		}
		unknownFor = m - h.unknownSince
	default:
		h.offRun = h.offRun[:0]
	}
	if state != power.StateUnknown {
		h.unknownRun = false
	}
	if state == power.StateUnknown || state == power.StateTransitioning {
		if !h.unsureRun {
			h.unsureRun, h.unsureSince, h.unsureWhole = true, m, h.sawSane
		}
		unsureFor = m - h.unsureSince
	} else {
		if h.unsureRun || !h.sawSane {
			h.saneSince, h.sawSane = m, true
		}
		h.unsureRun = false
		saneFor = m - h.saneSince
	}
	return offFor, unknownFor, unsureFor, saneFor
}

// writing notes that st is about to be written: its values of the fields
// ownValues holds are this controller's from now on, whatever the write
// returns. A write whose answer is lost (a timeout) may have been applied,
// and its values must not then be taken for another writer's (that would
// count this controller's own LastPress as a press sent by another, and
// hold every press back for SoftTimeout). One that was not applied leaves
// values nobody else writes: under A3 and A4 another leader stamps its
// values from its own clock in passes run under its own lease, so never
// with the instants this controller read from its clock while it led.
func (h *memory) writing(st Status) {
	h.own.note(st)
	h.own.wrotePress.add(st.LastPress)
}

// wrote notes that st, decided in the pass at m from o, was written: the
// pass's own values are known from m.
func (h *memory) wrote(o Observed, st Status, m time.Duration) {
	h.pend.add(st.PendingRebootSince, m)
	h.req.add(st.LastRequestSeen, m)
	if v := st.RewriteSeen; v.Equal(o.Status.LastRewriteSeen) && !v.Equal(o.Status.RewriteSeen) {
		h.rew.add(v, m-o.SinceLastRewrite) // promoted: known since it was the latest
	} else {
		h.rew.add(v, m)
	}
	h.lastRew.add(st.LastRewriteSeen, m)
	h.own.note(st)
}

// ownValues are the values of the Status fields that show a power-off
// (PendingRebootSince, OfflineSince, LastPress) or a power-on
// (LastPoweredOn) this controller knows: it
// wrote them (or sent a write of them whose answer it may have lost: see
// writing), read them in its first pass (dated from its start), or
// already honoured them as another writer's. A value not among them is
// another writer's (a previous leader's, across a handover).
type ownValues struct {
	pend, offline, press timeSet
	// on holds the LastPoweredOn values, which show a power-on (see
	// memory.quietFor).
	on timeSet
	// wrotePress holds the LastPress values this controller wrote
	// (writing): a press under one is its own, noted lost at its return
	// if its answer was (sentOff), never a press it did not see answered
	// (another leader stamps its values from its own clock, A3, A4).
	wrotePress timeSet
}

// note adds st's values.
func (v *ownValues) note(st Status) {
	v.pend.add(st.PendingRebootSince)
	v.offline.add(st.OfflineSince)
	v.press.add(st.LastPress)
	v.on.add(st.LastPoweredOn)
}

// quietFor returns Observed.QuietFor for a pass at m that read st: the
// time since this controller's last power-on sent, or since its start.
// Every power-on is recorded in Status.LastPoweredOn by a versioned write
// before it is sent, so a LastPoweredOn this controller neither wrote nor
// knew, read in a later pass (another leader's power-on, written while
// this one stood by), counts as a power-on sent at this pass, never
// earlier; so does one read in the first pass but stamped after the
// start's wall clock (late: written after the start). In a pass run while
// standing by, any LastPoweredOn counts as a power-on sent now, at every
// such pass (see sinceOff and lead). Call it before sinceOff, which notes
// st's values as known.
func (h *memory) quietFor(first bool, st Status, m time.Duration, late, standby bool) time.Duration {
	foreign := !first && !st.LastPoweredOn.IsZero() && !h.own.on.has(st.LastPoweredOn)
	if standby && !st.LastPoweredOn.IsZero() {
		foreign, h.heard.on = true, true
	}
	if foreign || late {
		h.lastOn = max(h.lastOn, m)
	}
	return m - h.lastOn
}

// foreign reports whether st shows a power-off (a pending reboot, Online
// false enforced, a press) and whether a press whose values this
// controller does not know: another writer may have sent it. A status of
// an older format that may hide a press (Status.hidesPress; onToggles is
// Observed.OnToggles) shows one whose values are those that hide it.
func (v *ownValues) foreign(st Status, onToggles bool) (off, press bool) {
	newPend := st.Pending() && !v.pend.has(st.PendingRebootSince)
	newOffline := !st.OfflineSince.IsZero() && !v.offline.has(st.OfflineSince)
	newOn := onToggles && !st.LastPoweredOn.IsZero() && !v.on.has(st.LastPoweredOn)
	press = !st.LastPress.IsZero() && !v.press.has(st.LastPress) ||
		st.hidesPress(onToggles) && (newPend || newOffline || newOn)
	off = press || newPend || newOffline
	return off, press
}

// timeSet holds the latest few values of a timestamp.
type timeSet struct {
	at [4]time.Time
	n  int
}

func (t *timeSet) has(v time.Time) bool {
	for i := 0; i < t.n; i++ {
		if t.at[i].Equal(v) {
			return true
		}
	}
	return false
}

func (t *timeSet) add(v time.Time) {
	if v.IsZero() || t.has(v) {
		return
	}
	copy(t.at[1:], t.at[:len(t.at)-1])
	t.at[0] = v
	t.n = min(t.n+1, len(t.at))
}

// called remembers the outcome of a power call, which returned err, and
// returns it with Repeats and Fails filled; a hard power-off's answer
// sets or clears Observed.HardUnsupportedAt (one that was busy or failed
// says neither).
func (h *memory) called(c Call, err error) Call {
	if c.Action == ActionPowerOff && c.Mode == power.ModeHard {
		switch c.Class {
		case power.ClassUnsupported:
			h.hardUnsupportedAt = c.At
		case power.ClassNone:
			h.hardUnsupportedAt = time.Time{}
		}
	}
	c.Repeats = 0
	if h.last.Action == c.Action && h.last.Mode == c.Mode {
		c.Repeats = h.last.Repeats + 1
	}
	c.Fails = unansweredFails(h.last.Fails, err)
	c.Errors = 0
	if c.Class == power.ClassBusy || c.Class == power.ClassFailed {
		c.Errors = h.last.Errors + 1
	}
	h.last = c
	return c
}

// unansweredFails is Call.Fails after a call that returned err, fails
// the count before it: one more after a call that got no answer
// (answerLost: a timeout, a lost connection), the same after one never
// sent (a Pool's back-off, power.ErrNotSent, ErrNotLeader: nothing was
// learnt of the BMC), zero after any answer, accepted or an error
// (HTTP 409 or 500, a refused login): a BMC that answers is not dead,
// and its calls are tried again after RetryDelay, not after a back-off
// grown while it answered nothing
// (TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack).
func unansweredFails(fails int, err error) int {
	switch {
	case answerLost(err):
		return fails + 1
	case err != nil && !errors.Is(err, power.ErrAuth) && notCarriedOut(err):
		return fails
	}
	return 0
}

// readAnswered notes a power state read that returned err: one that got
// an answer (no error, or an error the BMC answered) after one that got
// none shows the BMC back (its network, say), and the back-off of calls
// that got none ends (Call.Fails). Reads answered all along do not end
// it: a BMC that answers reads but not power calls is not called every
// RetryDelay.
func (h *memory) readAnswered(err error) {
	lost := answerLost(err)
	if !lost && h.readLost {
		h.last.Fails = 0
	}
	h.readLost = lost
}

// sawState notes a reading of state taken between the monotonic times m
// and after (see offState.sawState) and returns Observed.PressOver and
// PressOverFor.
func (h *memory) sawState(state power.State, m, after, stale, settle time.Duration) (bool, time.Duration) {
	h.off.sawState(state, m, after, stale, settle)
	return h.off.over, m - h.off.overAt
}

// sendingOff notes a power-off about to be sent at m, a press of the power
// button if press, and returns the power-off memory before it, for
// sentOff.
func (h *memory) sendingOff(press bool, m time.Duration) (was offState) {
	was = h.off
	h.off.lastOff, h.off.noOff = m, false
	if press {
		h.off = offState{lastOff: m, lastPress: m}
	}
	return was
}

// sentOff notes the outcome err of the power-off noted by sendingOff,
// returned at done: one refused before it reached the hardware
// (notCarriedOut) is undone; any other may have reached the hardware at
// any time up to done (a slow BMC's lock, login and state read come
// first), so it counts as sent at done, the latest it may have landed
// (Observed.SinceOff, SincePress: the shutdown bound A2 counts from the
// press, not from the call's start); a press that returned success is
// dated. One answered busy (it may go on in the background) keeps was
// until the late answer (busyWas), which undoes it if it is a refusal
// (memory.late).
func (h *memory) sentOff(was offState, press bool, err error, done time.Duration) {
	if notCarriedOut(err) {
		h.off = was
		return
	}
	if !errors.Is(err, power.ErrBusy) {
		h.busyWasSet = false
	} else if !h.busyWasSet {
		h.busyWas, h.busyWasSet = was, true
	}
	if answerLost(err) {
		// A5: it may land LostLanding after now; the call in flight
		// (mayFly) may still be settled by a late answer (memory.late).
		h.lost.note(press, done, h.lost.mayFly(err))
	}
	h.busyPress = h.busyPress || press && errors.Is(err, power.ErrBusy)
	h.off.lastOff = max(h.off.lastOff, done)
	if press {
		h.off.lastPress = max(h.off.lastPress, done)
		if err == nil {
			h.off.returned, h.off.pressDone = true, done
		}
	}
}
