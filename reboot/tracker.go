package reboot

import (
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Tracker keeps what Decide needs remembered about one host between
// passes, for a caller that runs Decide itself instead of the Reconciler
// (as raft's RawNode keeps its core's inputs): the caller reports what it
// read and what it did, and Observe fills every Observed field that needs
// memory on a monotonic clock. The Reconciler keeps the same memory with
// the same helpers (reading, wrote, called below).
//
// One pass with a Tracker is: read the host record, read the controller's
// clock and monotonic clock, read the power state (in that order: the
// evidence a reading gives is stamped no later than the reading), call
// Observe, Decide, write the decision's Status if asked and call Applied
// once the write succeeded (or at once if none was asked), then call
// Sending just before a power call and Sent when it returns. A pass whose
// write failed calls neither Applied nor a power call: the next pass reads
// again.
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
}

// NewTracker returns a Tracker whose controller started at start on its
// monotonic clock, when its wall clock read startWall: what this process
// did to the host before start is unknown, what it did since is reported
// to the Tracker.
func NewTracker(start time.Duration, startWall time.Time) *Tracker {
	return &Tracker{started: true, start: start, startWall: startWall,
		mem: memory{lastOn: start, lastOff: start}}
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
	// SoftToggles and HardToggles are the power controller's
	// Toggler.TogglesOff answers (false if it is no Toggler).
	SoftToggles, HardToggles bool
}

// Observe starts a pass: it returns the Observed to give Config.Decide,
// with cfg the Config that will decide (only its OffSettle is read, with
// the host's override). Fields, and where they come from:
//
//   - Annotations, Online, Deprovisioned, Status, StaleReads, OffSettle:
//     copied from rd.Host. Power, SoftToggles, HardToggles: from rd.
//   - LastCall: the call last reported to Sent, with Repeats counting the
//     same action and mode sent in a row before it (zero before any).
//   - QuietFor: Mono since the last Sending of a power-on, or since the
//     start if none.
//   - SinceOff: Mono since the last Sending of a power-off, or since the
//     start if none; unbounded if none was sent and the Status read in
//     the first pass shows no power-off under way (no reboot pending, no
//     Online=false being enforced) and Forget was not called.
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
//   - Changed: rd.Host.Version was not handled lately (by Applied), or
//     this is the first pass.
func (t *Tracker) Observe(rd Reading, cfg Config) Observed {
	m, h := rd.Mono, rd.Host
	if !t.started {
		*t = Tracker{started: true, start: m, startWall: rd.Now, mem: memory{lastOn: m, lastOff: m}}
	}
	hm := &t.mem
	first := !hm.known
	hm.known = true
	fromStart := first && !hm.forgot
	since := func(a *anchors, v time.Time) time.Duration {
		return a.since(v, m, t.start, fromStart && !v.After(t.startWall))
	}
	o := Observed{
		Annotations:      h.Annotations,
		Online:           h.Online,
		Deprovisioned:    h.Deprovisioned,
		Status:           h.Status,
		Power:            rd.Power,
		LastCall:         hm.last,
		QuietFor:         m - hm.lastOn,
		SinceOff:         hm.sinceOff(first, h.Status, m),
		SincePending:     since(&hm.pend, h.Status.PendingRebootSince),
		SinceRequest:     since(&hm.req, h.Status.LastRequestSeen),
		SinceRewrite:     since(&hm.rew, h.Status.RewriteSeen),
		SinceLastRewrite: since(&hm.lastRew, h.Status.LastRewriteSeen),
		Changed:          !hm.seenVersion(h.Version) || first,
		StaleReads:       h.StaleReads,
		OffSettle:        h.OffSettle,
		SoftToggles:      rd.SoftToggles,
		HardToggles:      rd.HardToggles,
	}
	settle := cfg.withDefaults().forHost(Observed{StaleReads: h.StaleReads, OffSettle: h.OffSettle}).OffSettle
	o.OffFor, o.UnknownFor = hm.reading(rd.Power, m, settle)
	t.m, t.version, t.o = m, h.Version, o
	return o
}

// Applied reports that the pass's decision d was applied to the store:
// its Status written (written is the record's new version), or no write
// was asked (written is ignored). Not calling it after a failed write is
// safe: the record then counts as changed in the next pass.
func (t *Tracker) Applied(d Decision, written string) {
	hm := &t.mem
	hm.noteVersion(t.version)
	if d.UpdateStatus {
		hm.noteVersion(written)
		hm.wrote(t.o, d.Status, t.m)
	}
}

// Sending reports that a power call of action a is about to be made, at
// mono on the monotonic clock. Call it before the call: from then on an
// Off reading may echo the state before a power-on, and a shutdown may
// start, whatever the call returns.
func (t *Tracker) Sending(a Action, mono time.Duration) {
	switch a {
	case ActionPowerOn:
		t.mem.lastOn = mono
	case ActionPowerOff:
		t.mem.lastOff, t.mem.noOff = mono, false
	}
}

// Sent reports the outcome of the power call (Repeats is ignored) and
// returns it with Repeats filled; the next Observe gives it as LastCall.
func (t *Tracker) Sent(c Call) Call { return t.mem.called(c) }

// Forget drops what the Tracker knows, at mono on the monotonic clock, as
// a restart would: the host counts as possibly powered on and off just
// now, its values as known from now, and its record as changed.
func (t *Tracker) Forget(mono time.Duration, now time.Time) {
	*t = Tracker{started: true, start: mono, startWall: now,
		mem: memory{lastOn: mono, lastOff: mono, forgot: true}}
}

// reading notes a power reading at m and returns Observed.OffFor and
// UnknownFor.
func (h *memory) reading(state power.State, m, settle time.Duration) (offFor, unknownFor time.Duration) {
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
	return offFor, unknownFor
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
}

// called remembers the outcome of a power call and returns it with
// Repeats filled.
func (h *memory) called(c Call) Call {
	c.Repeats = 0
	if h.last.Action == c.Action && h.last.Mode == c.Mode {
		c.Repeats = h.last.Repeats + 1
	}
	h.last = c
	return c
}
