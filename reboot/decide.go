package reboot

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Action is the power action a decision asks for. The zero value is
// ActionNone.
type Action int

const (
	// ActionNone: make no power call.
	ActionNone Action = iota
	// ActionPowerOff: call Off with Decision.Mode.
	ActionPowerOff
	// ActionPowerOn: call On.
	ActionPowerOn
)

// String returns "none", "power-off" or "power-on".
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionPowerOff:
		return "power-off"
	case ActionPowerOn:
		return "power-on"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Phase summarises where a host stands, for logs and people.
type Phase int

const (
	// PhaseIdle: no reboot pending, the host is where Online wants it or
	// is getting there.
	PhaseIdle Phase = iota
	// PhasePoweringOff: a reboot is pending and the host is not off yet.
	PhasePoweringOff
	// PhaseHeldOff: the host is off and held there by keyed annotations or
	// by Online=false.
	PhaseHeldOff
	// PhasePoweringOn: the reboot's power-on is being issued.
	PhasePoweringOn
	// PhaseDeprovisioned: the host is deprovisioned; reboot requests are
	// cleared and power is not managed here.
	PhaseDeprovisioned
)

// String returns the phase's name.
func (p Phase) String() string {
	switch p {
	case PhaseIdle:
		return "idle"
	case PhasePoweringOff:
		return "powering-off"
	case PhaseHeldOff:
		return "held-off"
	case PhasePoweringOn:
		return "powering-on"
	case PhaseDeprovisioned:
		return "deprovisioned"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Config tunes decisions. The zero value is valid: every zero field takes
// its default.
type Config struct {
	// SoftTimeout is how long a soft shutdown may take, measured from
	// PendingRebootSince, before it falls back to hard. Default 180 s (the
	// metal3 operator's value).
	SoftTimeout time.Duration
	// LostLanding is how long after a power-off's call returned without
	// an answer (an error with no protocol status that is neither a
	// refusal before it was sent nor unsupported: a timeout, a broken
	// connection, a call still running in the background) the BMC may
	// still carry it out (assumption A5): such a power-off, and a press,
	// counts as sent that long after its return (Observed.SinceOff,
	// SincePress), whatever the adapter; so does one the controller did
	// not see answered (a previous process's or another writer's, see
	// doc.go A5), LostLanding after it first counted it. Default
	// SoftTimeout.
	LostLanding time.Duration
	// RetryDelay is how long to wait before retrying a power call that was
	// busy or failed (one answering a long run of unsure readings backs
	// off further, see Observed.UnsureFor; one made while the readings
	// are unknown too doubles it with every call in a row that got no
	// answer, at most an hour, Call.Fails). Default 10 s.
	RetryDelay time.Duration
	// PollInterval is how often to look again while waiting for the power
	// state to change. Default 5 s.
	PollInterval time.Duration
	// ReissueAfter is how long a power-off or a power-on that was accepted
	// may go without effect before it is sent again: a soft power-off while
	// the host reads On, a power-off or power-on while the reading says
	// nothing against it. (A hard power-off contradicted by an On reading
	// goes out sooner, see QuickPoll.) Default 60 s.
	ReissueAfter time.Duration
	// Precision is the precision timestamps are stored at. Default 1 s
	// (Kubernetes metav1.Time).
	Precision time.Duration
	// Policy says which keys may request (hard) reboots. The zero value
	// allows all.
	Policy Policy
	// StaleReads bounds how old a state a BMC may report: every reading
	// shows the hardware's state at some instant at most StaleReads before
	// the read (assumption A1). An Off reading is evidence only for
	// instants StaleReads before it, so a fence is answered about
	// StaleReads after the request at best (plus the power-off's lag).
	// Default 30 s. How to choose it: measure the BMC (power a host off and
	// on out of band and time how long reads show the old state, e.g. with
	// rebootctl or a script over its Redfish or IPMI), take the longest
	// seen, and add a margin (sushy-tools up to 11 s, iDRAC a few seconds;
	// 15 s is a fair setting for both). Too small a value risks a wrong
	// fencing answer; too large only slows answers. Set it per host with
	// Host.StaleReads (Observed.StaleReads) when BMCs differ.
	StaleReads time.Duration
	// OffSettle is for BMCs that report Off before the hardware is off
	// (seen: Off at once after ForceOff while the hardware ran 3 to 8 s
	// more). An Off reading counts only once the host has read Off for
	// OffSettle, and the evidence is dated from the reading OffSettle old.
	// Set it to the longest such early Off (assumption A1). Default 0: the
	// BMC says Off only once the hardware is off.
	OffSettle time.Duration
	// QuickPoll is how soon to read again after a power-off command (then
	// as long as it has been since the command, up to PollInterval) and
	// after an unknown reading while a reboot is pending (backing off to
	// PollInterval once the readings have been unknown for PollInterval).
	// It is also where repeating a hard power-off that a later reading
	// contradicts starts its backoff (doubling up to PollInterval).
	// Default 1 s.
	QuickPoll time.Duration
}

// DefaultConfig returns the configuration Decide uses, but for
// LostLanding, which it leaves zero: its default is taken from SoftTimeout
// when the Config is used, so that a copy whose SoftTimeout is changed
// gets its LostLanding too (use LostLandingOf to read it).
func DefaultConfig() Config {
	c := Config{}.withDefaults()
	c.LostLanding = 0
	return c
}

// LostLandingOf returns the LostLanding c is used with: c.LostLanding, or
// its default, c's SoftTimeout (or the default SoftTimeout).
func LostLandingOf(c Config) time.Duration { return c.withDefaults().LostLanding }

func (c Config) withDefaults() Config {
	if c.SoftTimeout <= 0 {
		c.SoftTimeout = 180 * time.Second
	}
	if c.LostLanding <= 0 {
		c.LostLanding = c.SoftTimeout
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.ReissueAfter <= 0 {
		c.ReissueAfter = 60 * time.Second
	}
	if c.Precision <= 0 {
		c.Precision = time.Second
	}
	if c.StaleReads <= 0 {
		c.StaleReads = 30 * time.Second
	}
	if c.OffSettle < 0 {
		c.OffSettle = 0
	}
	if c.QuickPoll <= 0 {
		c.QuickPoll = time.Second
	}
	return c
}

// forHost applies the host's own StaleReads and OffSettle.
func (c Config) forHost(o Observed) Config {
	if o.StaleReads > 0 {
		c.StaleReads = o.StaleReads
	}
	if o.OffSettle > 0 {
		c.OffSettle = o.OffSettle
	}
	return c
}

// Decision says what the caller must do, in this order:
//
//  1. If UpdateStatus, persist Status and delete RemoveAnnotations, in one
//     write with optimistic concurrency if the store can; otherwise delete
//     the annotations first, then write the status. (Either order is safe:
//     a crash between them costs a pass, never a second power cycle.) On a
//     conflict, stop and decide again from a fresh read.
//  2. Make the power call Power (with Mode), and keep its outcome as
//     Observed.LastCall for the next pass (Call.For = For).
//  3. Decide again after RequeueAfter, or at once after a power call; zero
//     means nothing is due until something changes.
type Decision struct {
	// UpdateStatus says Status and RemoveAnnotations must be written.
	UpdateStatus bool
	// Status is the status to persist.
	Status Status
	// RemoveAnnotations are annotation keys to delete, sorted.
	RemoveAnnotations []string
	// Power is the power call to make after persisting.
	Power Action
	// Mode is the mode of a power-off.
	Mode power.Mode
	// For is the work a power-off is decided for (zero for any other
	// decision): give it to the call's outcome (Call.For).
	For Work
	// RequeueAfter is when to decide again if nothing changes first.
	RequeueAfter time.Duration
	// Phase is where the host stands after this decision.
	Phase Phase
	// Requests are the requests that counted in this pass.
	Requests []Request
	// Warnings are problems with annotations (each an *AnnotationError),
	// a stored timestamp repaired (ErrFutureTimestamp) or a hard power-off
	// sent soft (ErrNoHardPowerOff); report them, e.g. as Kubernetes
	// events.
	Warnings []error
	// Reason says why, in a few words.
	Reason string
}

// Decide is DefaultConfig().Decide.
func Decide(o Observed, now time.Time) Decision { return Config{}.Decide(o, now) }

// ErrFutureTimestamp is the warning Decide gives when a stored timestamp
// is later than the controller's clock: the clock ran ahead when it was
// written and has been corrected since. Decide repairs it (see Status).
var ErrFutureTimestamp = errors.New("reboot: stored timestamp later than the controller's clock")

// ErrNoHardPowerOff is the warning Decide gives when it sends a power-off
// soft that it would have sent hard, because the BMC answered the last
// hard one unsupported (Observed.HardUnsupportedAt): the host goes off only
// if its OS shuts down. Give the BMC a forced power-off (a Redfish
// ForceOff or PushPowerButton reset type, IPMI power down) to have hard
// reboots and broken holds powered off whatever the OS does.
var ErrNoHardPowerOff = errors.New("reboot: the BMC offers no hard power-off: powering off soft")

// offMode returns the mode to send a power-off in that should be m: soft
// instead of hard for ReissueAfter after the BMC answered the last hard
// one unsupported (Observed.HardUnsupportedAt). If it is sent, the
// decision warns.
func (c Config) offMode(o Observed, m power.Mode, now time.Time) power.Mode {
	at := o.HardUnsupportedAt
	if m == power.ModeHard && !at.IsZero() && !now.Before(at) && now.Sub(at) < c.ReissueAfter {
		return power.ModeSoft
	}
	return m
}

// sendOff sets d to send a power-off in mode m that should have been in
// mode want, warning if the BMC's lack of a hard power-off made them
// differ.
func (d *Decision) sendOff(m, want power.Mode) {
	d.Power, d.Mode = ActionPowerOff, m
	if m != want {
		d.Warnings = append(d.Warnings, ErrNoHardPowerOff)
	}
}

// Decide returns what to do for one host given what was observed and the
// controller's current time. It is a pure function: same input, same output.
// now must be read before the power state (see the package doc).
func (c Config) Decide(o Observed, now time.Time) Decision {
	var d Decision
	c.DecideInto(&d, o, now)
	return d
}

// DecideInto is Decide writing into d, reusing the capacity of its slices:
// a caller that keeps one Decision per goroutine makes a pass that changes
// nothing allocate nothing (for annotation values Client writes or plain
// {"mode":...} ones). d's previous contents are overwritten.
func (c Config) DecideInto(d *Decision, o Observed, now time.Time) {
	reqs, warns, removes := d.Requests, d.Warnings, d.RemoveAnnotations[:0]
	*d = Decision{Status: o.Status, RemoveAnnotations: removes}
	d.Requests, d.Warnings = parseInto(reqs, warns, o.Annotations, c.Policy)
	c.decide(d, o, now)
	c.stampFormat(o, &d.Status, now)
	if d.Power == ActionPowerOff {
		d.For = d.Status.work()
	}
	if len(d.RemoveAnnotations) == 0 {
		d.RemoveAnnotations = nil
	}
}

// stampFormat writes StatusFormat into st, the status decided from o,
// unless st is empty. A status of an older format may hide a press a
// previous process sent (Status.hidesPress): it is recorded as one now,
// so that a later restart still counts it (Status.Format).
func (c Config) stampFormat(o Observed, st *Status, now time.Time) {
	st.Format = 0
	if st.Equal(Status{}) {
		return
	}
	if st.LastPress.IsZero() && o.mayPress() && o.Status.hidesPress(o.OnToggles) {
		st.LastPress = now.Truncate(c.withDefaults().Precision)
	}
	st.Format = StatusFormat
}

func (c Config) decide(d *Decision, o Observed, now time.Time) {
	c = c.withDefaults().forHost(o)
	p := now.Truncate(c.Precision)
	st := &d.Status
	if w := repair(st, p, c.Precision); w != nil {
		d.Warnings = append(d.Warnings, w)
	}

	if o.Status.Format < formatSaneOff {
		// Written before the call, whatever its answer: not a power-off
		// known accepted (Status.OffOnSane).
		st.OffOnSane = time.Time{}
	}

	if o.Deprovisioned {
		c.deprovision(o, d)
		return
	}

	var hasBare, hasKeyed, wantHard bool
	for _, r := range d.Requests {
		hasBare = hasBare || !r.Keyed()
		hasKeyed = hasKeyed || r.Keyed()
		wantHard = wantHard || r.Mode == power.ModeHard
	}

	var moved bool
	var unmoved Status // OffOnSane and OffOnSaneDecided before confirmSaneOff
	begun := !st.Pending() && len(d.Requests) > 0
	if begun {
		// A new reboot. Requests seen while one is pending join it instead.
		st.PendingRebootSince = maxTime(p, st.LastPoweredOn)
		st.Works++
		st.Mode = power.ModeSoft
		if wantHard {
			st.Mode = power.ModeHard
		}
		st.Seen, st.LastRequestSeen, st.HoldBroken = nil, time.Time{}, time.Time{}
		st.RewriteSeen, st.LastRewriteSeen, st.SoftSince = time.Time{}, time.Time{}, time.Time{}
		st.OffOnSane, st.OffOnSaneDecided, st.StuckOnDecided, st.StuckGaveUp = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	}
	if st.Pending() {
		if c.see(d.Requests, p, st) && !begun {
			// A request joined: what the reboot's power-offs and
			// power-on showed before it says nothing of it
			// (releasedPending, bareStuck).
			st.OffOnSane, st.OffOnSaneDecided, st.StuckOnDecided, st.StuckGaveUp = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		}
		if o.Changed && hasKeyed && st.LastRequestSeen.Equal(o.Status.LastRequestSeen) {
			// Someone wrote the record and the requests are as they were:
			// not a new request, but one may have been removed and added
			// again with the same value. Answered apart (rewrite.go).
			c.noteRewrite(p, st)
		}
		c.evidence(o, p, st)
		unmoved.OffOnSane, unmoved.OffOnSaneDecided = st.OffOnSane, st.OffOnSaneDecided
		moved = st.confirmSaneOff(o)
	}
	if st.Pending() {
		c.pending(o, now, p, hasBare, hasKeyed, wantHard, d)
	} else {
		c.idle(o, now, p, d)
	}
	if !st.Pending() {
		st.StuckGaveUp = time.Time{} // the reboot ended (Status.StuckGaveUp)
	}
	c.noteUnsure(o, now, st)
	if d.Power == ActionPowerOff && o.toggles(d.Mode) || d.Power == ActionPowerOn && o.OnToggles {
		// A press (a power-off's, or a power-on's on a BMC whose
		// power-on presses the button) is persisted before it is sent,
		// for a restarted controller (Status.LastPress,
		// TestReview36p_RestartForgetsLostPowerOnPress).
		st.LastPress = maxTime(p, st.LastPress)
	} else if !st.LastPress.IsZero() && c.pressSettled(o) {
		st.LastPress = time.Time{} // its shutdown is over: a restart need not wait
	}
	if d.Power != ActionNone {
		// A call decided now (a power-off, or a power-on that may press
		// the power button) returns after any instant known now: nothing
		// bounds it until it has (Status.ActingSince).
		st.ActingSince = time.Time{}
	} else if a := o.ActingSince.Truncate(c.Precision); !o.ActingSince.IsZero() && a.After(st.ActingSince) && !a.After(p) &&
		(st.Pending() || !st.OfflineSince.IsZero() || !st.LastPress.IsZero()) {
		// Every power-off and press decided so far had returned by then:
		// a later restart or leadership may count them from then.
		st.ActingSince = a
	}
	if moved {
		d.keepSaneOff(o, unmoved)
	}
	d.UpdateStatus = d.UpdateStatus || !d.Status.Equal(o.Status) || len(d.RemoveAnnotations) > 0
}

// evidence moves the fencing evidence forward on an Off reading that
// cannot echo a state from before the requests. By assumption A1 an Off
// reading taken at r shows the hardware off at some instant in
// [r-StaleReads, r] (with OffSettle: of the reading OffSettle old, the
// hardware being off by now). The instants are measured on the monotonic
// clock from the pass that saw the request (SincePending, SinceRequest),
// and stamped on the wall clock from that pass's timestamp, so that a wall
// clock that jumps forward cannot date the evidence late.
func (c Config) evidence(o Observed, p time.Time, st *Status) {
	if o.Power != power.StateOff || o.OffFor < c.OffSettle {
		return
	}
	sincePending, sinceRequest := o.SincePending, o.SinceRequest
	if !st.PendingRebootSince.Equal(o.Status.PendingRebootSince) {
		sincePending = 0 // seen in this very pass
	}
	if !st.LastRequestSeen.Equal(o.Status.LastRequestSeen) {
		sinceRequest = 0
	}
	sinceRewrite := o.rewriteSince(st.RewriteSeen)
	var e time.Time
	for _, a := range [...]struct {
		at    time.Time
		since time.Duration
	}{{st.PendingRebootSince, sincePending}, {st.LastRequestSeen, sinceRequest}, {st.RewriteSeen, sinceRewrite}} {
		if a.at.IsZero() {
			continue
		}
		if lead := a.since - o.OffFor - c.StaleReads; lead >= 0 {
			e = maxTime(e, a.at.Add(lead).Truncate(c.Precision))
		}
	}
	if e.IsZero() {
		return
	}
	if e.After(p) {
		e = p // a wall clock that jumped back: never ahead of the clock
	}
	// Move it only when it comes to cover the pending reboot's start or
	// its latest request: at most two writes per new request, none per
	// pass of a long hold.
	level := func(t time.Time) int {
		switch {
		case t.IsZero() || t.Before(st.PendingRebootSince):
			return 0
		case !t.After(st.LastRequestSeen):
			return 1
		}
		return 2
	}
	if e.After(st.LastPoweredOff) && level(e) > level(st.LastPoweredOff) {
		st.LastPoweredOff = e
	}
	st.coverRewrite(e)
}

// untilEvidence is how long until an Off reading like this one could be
// evidence covering the latest request (zero if it is, or cannot tell).
func (c Config) untilEvidence(o Observed, st *Status) time.Duration {
	since := o.SinceRequest
	if !st.LastRequestSeen.Equal(o.Status.LastRequestSeen) {
		since = 0
	}
	wait := c.StaleReads + c.Precision - (since - o.OffFor)
	if o.Power == power.StateOff && o.OffFor < c.OffSettle {
		wait = max(wait, c.OffSettle-o.OffFor)
	}
	return max(wait, 0)
}

// see records the requests of the pending reboot: a request not seen in
// the last pass moves LastRequestSeen to now. Both lists are sorted by
// name, so one merge suffices, and nothing is allocated unless they differ.
// It reports whether a request not seen in the last pass came.
func (c Config) see(reqs []Request, p time.Time, st *Status) (added bool) {
	found, j := 0, 0
	for _, r := range reqs {
		h := valueHash(r.Value)
		for j < len(st.Seen) && idName(st.Seen[j]) < r.Name {
			j++
		}
		if j < len(st.Seen) && idIs(st.Seen[j], r.Name, h) {
			found++
			j++
			continue
		}
		st.LastRequestSeen = maxTime(p, st.PendingRebootSince)
		added = true
	}
	if found == len(reqs) && len(reqs) == len(st.Seen) {
		return added
	}
	seen := make([]string, len(reqs))
	for i, r := range reqs {
		seen[i] = seenID(r.Name, r.Value)
	}
	slices.Sort(seen)
	st.Seen = seen
	return added
}

// seenID identifies a request in Status.Seen: its annotation name, '#',
// and the FNV-1a hash of its value in hex. Valid names hold no '#', and
// '#' sorts before every character they may hold, so IDs sort as names do.
func seenID(name, value string) string {
	return name + "#" + strconv.FormatUint(uint64(valueHash(value)), 16)
}

func valueHash(v string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(v); i++ {
		h ^= uint32(v[i])
		h *= 16777619
	}
	return h
}

// idName returns the name part of a Seen ID.
func idName(id string) string {
	if i := strings.IndexByte(id, '#'); i >= 0 {
		return id[:i]
	}
	return id
}

// idIs reports whether id is seenID(name, value) for a value of hash h,
// without allocating.
func idIs(id, name string, h uint32) bool {
	if len(id) <= len(name) || id[:len(name)] != name || id[len(name)] != '#' {
		return false
	}
	v, err := strconv.ParseUint(id[len(name)+1:], 16, 32)
	return err == nil && uint32(v) == h
}

// seenIndex finds the request (name, value) in a Seen list.
func seenIndex(seen []string, name, value string) (int, bool) {
	h := valueHash(value)
	for i, id := range seen {
		if idIs(id, name, h) {
			return i, true
		}
	}
	return -1, false
}

// repair clamps timestamps later than p (the clock ran ahead and was
// corrected, or jumped back) to p and says so. A reboot whose power-on
// was decided stays done: clamped to p, LastPoweredOn may tie with
// PendingRebootSince, which would make the reboot pending again with its
// evidence dropped and power-cycle the host a second time for one
// request; PendingRebootSince is then moved to one precision tick before
// it (TestReview36r_ClockCorrectionAfterPowerOnCyclesAgain).
func repair(st *Status, p time.Time, precision time.Duration) error {
	var fixed []string
	done := !st.PendingRebootSince.IsZero() && !st.Pending()
	clamp := func(name string, t *time.Time) {
		if t.After(p) {
			fixed = append(fixed, name+"="+t.Format(time.RFC3339))
			*t = p
		}
	}
	clamp("lastPoweredOn", &st.LastPoweredOn)
	clamp("pendingRebootSince", &st.PendingRebootSince)
	clamp("lastRequestSeen", &st.LastRequestSeen)
	clamp("offlineSince", &st.OfflineSince)
	clamp("holdBroken", &st.HoldBroken)
	clamp("rewriteSeen", &st.RewriteSeen)
	clamp("lastRewriteSeen", &st.LastRewriteSeen)
	clamp("lastPress", &st.LastPress)
	clamp("softSince", &st.SoftSince)
	clamp("offlineSoftSince", &st.OfflineSoftSince)
	clamp("offlineOffSeen", &st.OfflineOffSeen)
	clamp("unsureSince", &st.UnsureSince)
	clamp("offOnSane", &st.OffOnSane)
	clamp("offOnSaneDecided", &st.OffOnSaneDecided)
	clamp("stuckOnDecided", &st.StuckOnDecided)
	clamp("stuckGaveUp", &st.StuckGaveUp)
	if st.ActingSince.After(p) {
		// Moved earlier it would date earlier processes' presses early:
		// dropped (a restart then counts them from its own start).
		fixed = append(fixed, "actingSince="+st.ActingSince.Format(time.RFC3339)+" (dropped)")
		st.ActingSince = time.Time{}
	}
	if st.LastPoweredOff.After(p) {
		// Evidence labelled by a clock that ran ahead cannot be placed on
		// the corrected clock: drop it rather than vouch for it.
		fixed = append(fixed, "lastPoweredOff="+st.LastPoweredOff.Format(time.RFC3339)+" (dropped)")
		st.LastPoweredOff = time.Time{}
	}
	if done && st.Pending() {
		st.PendingRebootSince = st.LastPoweredOn.Add(-precision)
		fixed = append(fixed, "pendingRebootSince moved to "+st.PendingRebootSince.Format(time.RFC3339)+" (the reboot stays done)")
	}
	if len(fixed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s repaired to %s", ErrFutureTimestamp, strings.Join(fixed, ", "), p.Format(time.RFC3339))
}

// wait reports whether the last call (same action and mode) should be
// given time rather than repeated now; if so it sets the requeue. state
// is this pass's reading: a power-off that was accepted but contradicted
// by a later On reading is repeated (backing off): the Controller may have
// skipped it on a read of its own that echoed an old Off, or it was lost.
// A power-off decided for another known work (an earlier reboot or
// Online=false enforcement) is not waited on: it says nothing of this
// work, whose first power-off is sent at once; an accepted soft
// power-off is waited on as under way only if it was decided for this
// work (Call.For: TestReview36w_OfflineAgainAfterSoftOffNeverPowersOff,
// TestReview36w_SoftRebootAfterOfflineSoftOffNeverSent).
func (c Config) wait(last Call, a Action, m power.Mode, now time.Time, state power.State, d *Decision) bool {
	if last.Action != a || (a == ActionPowerOff && last.Mode != m) {
		return false
	}
	work := d.Status.work()
	if a == ActionPowerOff && last.For != (Work{}) && !last.For.Is(work) {
		return false // another work's power-off says nothing of this one's
	}
	var delay time.Duration
	switch last.Class {
	case power.ClassNone:
		switch {
		case a == ActionPowerOff && m == power.ModeHard && state == power.StateOn:
			delay = min(c.QuickPoll<<min(last.Repeats, 16), c.PollInterval)
		case a == ActionPowerOff && m == power.ModeSoft && state != power.StateOn && last.For.Is(work):
			// A soft shutdown runs until it is done or times out.
			d.Reason = "soft power-off under way: wait"
			d.RequeueAfter = c.readBackoff(last, now)
			return true
		case a == ActionPowerOff && isUnsure(state):
			delay = c.offRepeatWait(last)
		default:
			delay = c.ReissueAfter
		}
	case power.ClassBusy, power.ClassFailed:
		delay = c.RetryDelay
		if state == power.StateUnknown {
			delay = c.deadBackoff(last)
		}
	default:
		return false
	}
	since := now.Sub(last.At)
	if since < 0 || since >= delay {
		return false // due again (or the clock jumped: do not stall)
	}
	if d.Reason == "" || last.Class != power.ClassNone {
		outcome := last.Class.String()
		if last.Class == power.ClassNone {
			outcome = "accepted"
		}
		d.Reason = fmt.Sprintf("last %s was %s: wait", a, outcome)
	}
	d.RequeueAfter = delay - since
	if last.Class == power.ClassNone {
		d.RequeueAfter = min(d.RequeueAfter, c.readBackoff(last, now))
	} else if delay > c.RetryDelay {
		// Backing off a dead BMC (deadBackoff): read it as often as
		// ever, so that the call goes out soon after it answers again.
		d.RequeueAfter = min(d.RequeueAfter, c.PollInterval)
	}
	return true
}

// deadBackoff is how long to wait before repeating a call that was busy
// or failed while the BMC's readings are unknown too (a BMC that answers
// nothing: a fence asked of a host whose rack lost its network): RetryDelay
// doubled with every call in a row before it that got no answer, none
// answered since, nor a reading after one that got none (Call.Fails), at
// most retryCap, so that a dead BMC gets a few calls (and their Status
// writes) an hour, not one every RetryDelay
// (TestReview36y_FenceOnDeadBMCStatusChurn). The first try is never
// delayed, and neither is a try once the BMC answers a reading again
// (On, Off or Transitioning: RetryDelay; a null one ends Call.Fails) or
// a call.
func (c Config) deadBackoff(last Call) time.Duration {
	return min(c.RetryDelay<<min(max(last.Fails-1, 0), 16), retryCap)
}

// unknownBackoff is when to read again after an unknown reading:
// QuickPoll for the first PollInterval of an unbroken run of unknown
// readings (a BMC that answers null now and then is read again at once),
// then as long as the run has gone on beyond that, at most PollInterval
// (one that answers null for ever is read every PollInterval).
func (c Config) unknownBackoff(o Observed) time.Duration {
	return max(min(o.UnknownFor-c.PollInterval, c.PollInterval), c.QuickPoll)
}

// readBackoff is when to read again after the last power call: QuickPoll
// right after it, then as long as it has been since (doubling), at most
// PollInterval.
func (c Config) readBackoff(last Call, now time.Time) time.Duration {
	if last.Action == ActionNone {
		return c.PollInterval
	}
	since := now.Sub(last.At)
	return max(min(since, c.PollInterval), c.QuickPoll)
}

// cap bounds a requeue delay to [Precision/10, SoftTimeout], so that a
// clock jump never schedules the next look absurdly far or in the past.
func (c Config) cap(d time.Duration) time.Duration {
	return max(min(d, c.SoftTimeout), c.Precision/10)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sinceOn reports whether a power-on of ours was sent to the host, by
// persisted evidence (Status.LastPoweredOn, written before every power-on
// is sent), and how long ago at most it may have been sent: the longer of
// the wall clock's time since LastPoweredOn and QuietFor (a restart, which
// QuietFor counts from, is no power-on).
func (c Config) sinceOn(o Observed, st *Status, now time.Time) (time.Duration, bool) {
	if st.LastPoweredOn.IsZero() {
		return 0, false
	}
	return max(now.Sub(st.LastPoweredOn), o.QuietFor), true
}

// poweringOn reports whether a Transitioning reading may be a power-on of
// this controller's still under way (the hardware powering on through
// POST, during which an OS hears no soft power-off): the last power call
// is not a power-off and a power-on was sent less than SoftTimeout +
// StaleReads ago (sinceOn: persisted evidence, never the controller's
// start, TestReview36w_StuckTransitioningFenceNeverSentAcrossRestarts).
// After that bound a Transitioning reading shows nothing of ours (a BMC
// stuck on it while the host runs,
// TestReview36u_StuckTransitioningHardRebootNeverSent) and the power-off
// goes out as on any reading. Only a soft power-off waits for it: a
// forced one is heard whatever the host does
// (TestReview36w_HardFenceAfterPowerOnWaitsForPOST).
func (c Config) poweringOn(o Observed, st *Status, now time.Time) bool {
	ago, sent := c.sinceOn(o, st, now)
	return o.Power == power.StateTransitioning && o.LastCall.Action != ActionPowerOff &&
		sent && ago < c.SoftTimeout+c.StaleReads
}

// poweringOnWait is when to read again while poweringOn: QuickPoll, at
// most until the bound passes.
func (c Config) poweringOnWait(o Observed, st *Status, now time.Time) time.Duration {
	ago, _ := c.sinceOn(o, st, now)
	return c.cap(min(c.QuickPoll, c.SoftTimeout+c.StaleReads-ago))
}
