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

// Status is the reboot part of a host's status, persisted by the caller.
// Every timestamp is written from the controller's clock, truncated to
// Config.Precision; a timestamp found later than the controller's clock (a
// clock that ran ahead and was corrected) is repaired by the next decision,
// with a warning.
type Status struct {
	// LastPoweredOn is the time the controller last decided to power the
	// host on (the seed's lastPoweredOn), written before the power-on is
	// sent. A client's bare reboot is done when its annotation is gone and
	// LastPoweredOn is later than its request. It is also the controller's
	// evidence of its own power-on (a restart is none): a soft power-off
	// waits for POST on a Transitioning reading only within SoftTimeout +
	// StaleReads of it (TestReview36w_StuckTransitioningFenceNeverSentAcrossRestarts).
	LastPoweredOn time.Time
	// OnConfirmed is LastPoweredOn once the controller has read the host
	// On in a reading that cannot echo the state from before that
	// power-on (Observed.QuietFor at least Config.StaleReads, by
	// assumption A1): the host was on at some instant after it. It is
	// cleared with every power-on written, so it equals LastPoweredOn only
	// for the power-on it confirms (a BMC that refuses the power-on never
	// gets it). Clients without a power controller of their own tell
	// "powered on" from "power-on decided" by it (remediation); a status
	// written by an earlier version has none, and the controller writes it
	// at its next such reading.
	OnConfirmed time.Time
	// PendingRebootSince is the time the controller first saw the current
	// reboot request (the seed's pendingRebootSince). A reboot is pending
	// while it is set and not before LastPoweredOn: a tie counts as pending,
	// because power-on is only done once the clock has passed it.
	PendingRebootSince time.Time
	// LastPoweredOff is the fencing evidence: the hardware is known to have
	// been off at some instant at or after it (on the controller's clock)
	// and before it was written. It comes from an Off reading that cannot
	// echo a state from before the request (see the package doc), so it
	// lies at least Config.StaleReads before that reading. It is moved
	// forward only while a reboot is pending, and only when it comes to
	// cover PendingRebootSince or LastRequestSeen, so a host held off costs
	// no write per pass. Fenced relies on it.
	LastPoweredOff time.Time
	// Mode is the power-off mode of the pending reboot. It only ever goes
	// from soft to hard within one reboot.
	Mode power.Mode
	// Seen identifies the requests of the pending reboot seen in the last
	// pass, sorted: the annotation name and a hash of its value (so that a
	// request removed and written again with another value counts as new).
	// LastRequestSeen is when a request not seen before last appeared. The
	// fencing evidence must be later than it, and power-on waits until the
	// clock has passed it, so that lastPoweredOn is later than every request
	// it answers, even at one-second precision.
	Seen            []string
	LastRequestSeen time.Time
	// OfflineSince is when the controller started powering the host off
	// because Spec.Online is false, and OfflineMode the mode it uses: soft
	// at first, hard Config.SoftTimeout after its first soft power-off
	// (OfflineSoftSince) or after a failed soft power-off.
	// Persisted so that a restarted controller still falls back to hard.
	// The enforcement ends only when Online becomes true: an Off reading
	// does not end it (an off host whose BMC answers null now and then
	// would start a new one on every Off/null flip,
	// TestReview36v_OfflineOffHostFlappingNullChurnsStatus); it records
	// it in OfflineOffSeen instead.
	OfflineSince time.Time
	OfflineMode  power.Mode
	// OfflineOffSeen is when an Off reading that cannot echo a state
	// from before this controller's last power-off or power-on (taken
	// StaleReads after both) showed the host off during the current
	// Online=false enforcement: its power-off is done. From then on
	// readings that say neither On nor Off send nothing (no power-off
	// repeated on a BMC that answers null now and then,
	// TestReview36w_OfflineOffHostFlappingNullForceOffForEver) unless
	// they last longer than SoftTimeout + StaleReads (Observed.UnsureFor:
	// then again every 2x(SoftTimeout + StaleReads)); an On reading, or such a run, begins a new episode
	// of the enforcement (a new OfflineSince and Works count, soft
	// first: TestReview36w_OfflineHostPoweredOnLaterCutHardAtOnce). Zero
	// while the enforcement's power-off is not known done.
	OfflineOffSeen time.Time
	// UnsureSince is when the current run of readings that say neither
	// On nor Off (unknown, transitioning) began (Observed.UnsureFor,
	// truncated), recorded once the run has lasted half of SoftTimeout +
	// StaleReads (shorter runs, however often they come, write nothing:
	// TestReview36x_HeldHostFlappingNullChurnsUnsureSince) for a host a
	// stuck rule may act on for it: a reboot pending, Online false, or a
	// Transitioning reading (an Online host with no reboot pending whose
	// readings are unknown writes nothing:
	// TestReview36y_RunningHostNullRunsChurnUnsureSince); cleared once On
	// or Off readings have lasted StaleReads (SoftTimeout + StaleReads
	// for an Online host with no reboot pending, whose run matters only
	// to a power-on that powers nothing off:
	// TestReview36z_RunningHostTransitioningRunsChurnUnsureSince)
	// (Observed.SaneFor: a shorter sane spell may echo, A1, and it is
	// kept through it, so that a BMC answering null for long with short
	// honest spells writes it once, not twice a spell). It is read only
	// by a controller that did not see the run begin
	// (Observed.UnsureWhole false: a restart during the run), which
	// counts the run from it, not from its start, once it has itself
	// read unsure readings for half of SoftTimeout + StaleReads (it may
	// date an earlier run, see below:
	// TestReview36z_RestartDuringFlappingNullFalseHoldBroken), so that
	// restarts every few minutes do not keep a held host that
	// someone else powered on running for ever
	// (TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes) nor a
	// released one off for ever
	// (TestReview36x_ReleasedOnStuckPoweringOffRestartsEveryThreeMinutes);
	// such a controller reads it on the wall clock (a forward step
	// lengthens the run) and, kept through short sane spells, it may
	// span several runs. Zero otherwise.
	UnsureSince time.Time
	// OfflineSoftSince is, for the Online=false enforcement, what
	// SoftSince is for a pending reboot: when its first soft power-off
	// was decided; OfflineMode falls back to hard SoftTimeout after it.
	OfflineSoftSince time.Time
	// HoldBroken is when the controller first read On, since the evidence
	// LastPoweredOff last moved, for a host it held off with evidence
	// covering every request: someone else powered it on. The controller
	// powered it off again in the same pass (one that may press the power
	// button waits for an On reading that cannot be an echo). It is also
	// set when the readings of a held host said neither On nor Off
	// (unknown, transitioning) for longer than SoftTimeout + StaleReads
	// (Observed.UnsureFor): the host may have been powered on and the
	// evidence cannot tell; the controller then sends a power-off that
	// sets the power, hard, and again every 2x(SoftTimeout + StaleReads)
	// while the run lasts (someone may power it on later in the run)
	// (TestReview36w_HeldHostOnStuckTransitioningNeverPoweredOff,
	// TestReview36w_HeldHostOnNullNeverPoweredOff,
	// TestReview36y_HeldHostPoweredOnLateInNullRunRunsForEver). Evidence for instants
	// before the sighting stays true (the processes that ran then did
	// stop); the host may have run since. Zero when no hold of the pending
	// reboot was broken. A BMC whose reads flap between ages (assumption
	// A1 allows it) can report a sighting that was an echo from before the
	// power-off, and one stuck on unsure readings a break that did not
	// happen. Client.HoldBroken reports it to clients.
	HoldBroken time.Time
	// RewriteSeen is the earliest write by someone else, not yet covered
	// by the evidence, that left the requests as they were but may have
	// removed one and added it again with the same value; LastRewriteSeen
	// the latest such write after it (zero if none). The evidence moves
	// forward to cover them, one after the other, without delaying any
	// other request (see rewrite.go: how a re-added request is told from
	// other writes).
	RewriteSeen, LastRewriteSeen time.Time
	// LastPress is when the controller last decided a power-off that may
	// press the power button (see Toggler), or a power-on that may
	// (OnToggler: a lost one may land on a host that runs by then and
	// shut it down, A5), written in a versioned write before the call. A restarted controller that finds it set counts a
	// press as possibly in effect from its start, or from ActingSince
	// (Observed.SincePress):
	// Online may have flipped back meanwhile, clearing OfflineSince, while
	// the OS still shuts down. It is cleared once no reading can echo a
	// state from before the press's shutdown (the window of pressWait has
	// passed), so that a restart then need not wait.
	LastPress time.Time
	// ActingSince bounds the power-offs and presses that may still land:
	// every power-off (a press included) and every power-on that may
	// press decided for the host had returned by then, as far as the
	// controller that wrote it knew (truncated to Config.Precision: by
	// ActingSince + Precision). It is written, while a power-off may be
	// in effect (a reboot pending, Online=false enforced, a LastPress),
	// once no such call is under way (Observed.ActingSince), and cleared
	// by the versioned write before every power call. A restarted
	// controller, or one that leads again after standing by, counts the
	// calls the status shows as returned by then (and, their answers
	// unknown, landing up to LostLanding later, A5), not from its own
	// start or leadership, so that restarts and lease hiccups every few
	// minutes do not put a press off for ever
	// (TestReview36o_RestartEveryThreeMinutesNeverReboots,
	// TestReview36o_LeaseHiccupEveryThreeMinutesNeverReboots). Zero if
	// unknown. Only a status of StatusFormat is read so: an older
	// version wrote its process's start here and never cleared it
	// (TestReview36t_UpgradeOldActingSinceBoundsHiddenPowerOnPress).
	ActingSince time.Time
	// Works counts the works begun for this host: each pending reboot
	// and each Online=false enforcement, when it begins, takes the next
	// count as its Work.N, so that two begun within one Config.Precision
	// tick (whose Since is the same) are told apart.
	Works uint64
	// SoftSince is when the controller first decided the pending
	// reboot's soft power-off (truncated to Config.Precision), written in
	// the versioned write before it is sent; zero, or earlier than
	// PendingRebootSince (an earlier reboot's), while none was. A soft
	// reboot escalates to hard SoftTimeout after it, not after
	// PendingRebootSince: one held back by the controller's own waits (a
	// press that may still land, landWait; an earlier press's shutdown,
	// pressWait) is tried soft first
	// (TestReview36t_UpgradeIdleHostSoftRebootHeldSixMinutesThenCutHard,
	// TestReview36tFix_HeldBackSoftRebootTriedSoftFirst).
	SoftSince time.Time
	// Format is the format of the status: StatusFormat in every status
	// this version writes (with anything else in it), zero in one written
	// before every press was recorded in LastPress (power-offs and
	// pressing power-ons). A controller takes a zero LastPress
	// as "no press may still land" only in a status of StatusFormat; in an
	// older one a pending reboot, an Online=false enforcement, or a
	// LastPoweredOn on a controller whose power-on may press (OnToggler)
	// counts as a press a previous process may have sent, in every pass
	// that reads it (a restart's first, a standby's, a new leader's)
	// (TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn,
	// TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn,
	// TestReview36s_RollingUpgradeHandoverPowersHeldHostOn).
	Format int
}

// StatusFormat is the Status.Format this version writes.
const StatusFormat = 1

// Equal reports whether s and o hold the same instants, modes and requests.
func (s Status) Equal(o Status) bool {
	return s.LastPoweredOn.Equal(o.LastPoweredOn) && s.OnConfirmed.Equal(o.OnConfirmed) &&
		s.PendingRebootSince.Equal(o.PendingRebootSince) &&
		s.LastPoweredOff.Equal(o.LastPoweredOff) && s.Mode == o.Mode &&
		s.LastRequestSeen.Equal(o.LastRequestSeen) && slices.Equal(s.Seen, o.Seen) &&
		s.OfflineSince.Equal(o.OfflineSince) && s.OfflineMode == o.OfflineMode &&
		s.HoldBroken.Equal(o.HoldBroken) && s.OfflineOffSeen.Equal(o.OfflineOffSeen) && s.UnsureSince.Equal(o.UnsureSince) &&
		s.RewriteSeen.Equal(o.RewriteSeen) && s.LastRewriteSeen.Equal(o.LastRewriteSeen) &&
		s.LastPress.Equal(o.LastPress) && s.ActingSince.Equal(o.ActingSince) && s.Works == o.Works &&
		s.SoftSince.Equal(o.SoftSince) && s.OfflineSoftSince.Equal(o.OfflineSoftSince) && s.Format == o.Format
}

// Pending reports whether a reboot is pending.
func (s Status) Pending() bool {
	return !s.PendingRebootSince.IsZero() && !s.PendingRebootSince.Before(s.LastPoweredOn)
}

// Fenced answers the fencing question of the seed: are all processes that
// ran on the host at time t guaranteed to have stopped? now is the asker's
// clock, which must be the controller's clock (or agree with it).
//
// It is true iff the fencing evidence LastPoweredOff is strictly after t and
// not later than now (a timestamp the clock has not reached is not vouched
// for: it was written by a clock that ran ahead). The evidence is a floored
// lower bound of an instant at which the hardware was off; a t equal to it
// may lie after that instant within the same clock tick, so a tie does not
// fence. It stays true after the host is powered on again: the processes
// that ran at t stopped all the same. For any t, at any precision, taken
// before the client's request annotation was written, Fenced(t, now)
// becomes true within one requeue (at most Config.Precision later) of the
// first pass whose Off reading counts as evidence for the request (see the
// package doc: about StaleReads after the controller first saw it). The
// assumptions are those of the package doc's Guarantees.
func (s Status) Fenced(t, now time.Time) bool {
	e := s.LastPoweredOff
	return !e.IsZero() && e.After(t) && !e.After(now)
}

// Covers reports whether the fencing evidence covers every request seen in
// the pending reboot: the hardware is known to have been off after the
// controller first saw each of them. A fencing client can wait for this
// instead of comparing times (Client.Fenced does both).
func (s Status) Covers() bool {
	// Both are floored to the precision: E > LastRequestSeen means E is at
	// least one precision later, so later than the unfloored instant too.
	return s.Pending() && !s.LastPoweredOff.IsZero() &&
		s.LastPoweredOff.After(s.LastRequestSeen) && !s.LastPoweredOff.Before(s.PendingRebootSince)
}

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

// Call is the outcome of the last power call the applier made for this
// host, fed back into the next decision. It lives in the applier's memory
// only: after a restart it is zero, and the decision simply issues the call
// again (power calls are idempotent).
type Call struct {
	// Action is the call made; ActionNone if none is known.
	Action Action
	// Mode is the mode of a power-off.
	Mode power.Mode
	// Class is the outcome: CallClass of the error (a call that was not
	// carried out, a refused login or a Pool's back-off, is busy).
	Class power.Class
	// At is the applier's clock when the call returned.
	At time.Time
	// For is the work the call was decided for (Decision.For); zero if
	// unknown. A soft power-off that failed escalates only the work it
	// was decided for: one made for an earlier reboot or Online=false
	// enforcement says nothing of this one, and one whose work is unknown
	// (a late answer of a call made before a restart, a new Tracker or a
	// Forget) escalates nothing (SoftTimeout still does).
	For Work
	// Repeats counts the calls of the same action and mode made right
	// before this one (0 for the first): repeated power-offs back off.
	Repeats int
	// Fails counts the calls in a row, of any action, that got no
	// answer (a timeout, a lost connection), this one included; a call
	// never sent (a Pool's back-off, power.ErrNotSent, ErrNotLeader)
	// leaves it as it was, and any answer (accepted, or an error the BMC
	// answered, a refused login included) or a power state read that got
	// an answer after one that got none sets it to 0: a pending power-off on a BMC that answers
	// nothing backs off with it (Config.RetryDelay)
	// (TestReview36z_NullSensorFenceWaitsLongAfterNetworkBack).
	Fails int
	// Errors counts the calls in a row, of any action, that were busy or
	// failed, answered or not, this one included (0 if it was accepted
	// or refused otherwise): a call answering a long run of unsure
	// readings backs off with it (a BMC that answers every power-on of a
	// running host with an error,
	// TestReview36x_StuckTransitioningRefusedPowerOnEveryRetryDelay).
	Errors int
}

// Work names what a power-off is decided for: a pending reboot (Reboot,
// Since its Status.PendingRebootSince) or an Online=false enforcement
// (Since its Status.OfflineSince), N the Status.Works count it took when
// it began (two works begun within one Config.Precision tick have the
// same Since: TestReview36k_SameSecondEnforcementTakesEarlierSoftFailure).
// The zero Work is unknown.
type Work struct {
	Reboot bool
	Since  time.Time
	N      uint64
}

// Is reports whether w and v are the same known work.
func (w Work) Is(v Work) bool {
	return !w.Since.IsZero() && w.Reboot == v.Reboot && w.Since.Equal(v.Since) && w.N == v.N
}

// work returns the work a power-off decided with status s is for: the
// pending reboot, else the Online=false enforcement (zero if neither).
func (s Status) work() Work {
	if s.Pending() {
		return Work{Reboot: true, Since: s.PendingRebootSince, N: s.Works}
	}
	return Work{Since: s.OfflineSince, N: s.Works}
}

// Observed is everything a decision depends on. Decide never modifies it.
type Observed struct {
	// Annotations are the host's annotations; only reboot ones are read.
	Annotations map[string]string
	// Online is the host's Spec.Online: whether it should be powered on.
	Online bool
	// Deprovisioned is true while the host is deprovisioned or being
	// deprovisioned: every reboot annotation is removed (the seed's rule)
	// and power is left to provisioning.
	Deprovisioned bool
	// Status is the persisted reboot status.
	Status Status
	// Power is the power state read in this pass (StateUnknown if the read
	// failed).
	Power power.State
	// LastCall is the outcome of the applier's last power call for this
	// host, if it remembers one. A soft power-off that failed escalates to
	// hard only if it was decided for the pending reboot (or the
	// Online=false enforcement) under way (Call.For): an earlier one's
	// failure, or one made for work unknown, says nothing of this one.
	LastCall Call
	// QuietFor is how long, on a monotonic clock, this controller has not
	// sent a power-on to this host before Power was read: the time since
	// its last On call, or since the controller started if it sent none
	// since; a Status.LastPoweredOn it neither wrote nor knew (another
	// leader's power-on, recorded before it was sent), or one read first
	// but stamped after the start, counts as a power-on sent at the pass
	// that first read it. With no reboot pending, an Off reading powers
	// the host on (Online) only when QuietFor is at least the stale bound:
	// before, it may echo the state from before that power-on.
	QuietFor time.Duration
	// SincePending and SinceRequest are how long, on a monotonic clock,
	// this controller has known the host's current Status.PendingRebootSince
	// and Status.LastRequestSeen: since the pass that wrote them, or since
	// it first read them, or since it started, whichever is latest it can
	// vouch for (after a restart: since the restart). They say how much
	// real time separates an Off reading from the requests (see the package
	// doc); zero is always safe and makes no Off reading evidence.
	SincePending, SinceRequest time.Duration
	// OffFor is the age, on a monotonic clock, of the latest Off reading
	// of this host that is at least the settle time (Config.OffSettle) old
	// and was followed only by Off (or unknown) readings, this pass's Off
	// reading included. With no settle time it is zero (this reading).
	OffFor time.Duration
	// Changed says the host record was written by someone else since this
	// controller's last pass (its Version differs from the one the
	// controller last read or wrote; true after a restart). It never makes
	// a request new (only a request name and value not seen before do);
	// with a reboot pending, keyed requests present and the requests as
	// they were, it is a possible re-add of a request with the same value,
	// answered apart (Status.RewriteSeen) without delaying the others.
	Changed bool
	// StaleReads and OffSettle, if positive, replace Config.StaleReads and
	// Config.OffSettle for this host (BMCs differ: see Config).
	StaleReads, OffSettle time.Duration
	// SoftToggles and HardToggles say that the host's power.Controller
	// may press the power button for a soft or a hard power-off (see
	// Toggler). Such a power-off is sent only on an On reading that
	// cannot echo a state from before a change this controller's calls
	// may have made: StaleReads after its last power-on (QuietFor) and
	// power-off (SinceOff), and after the shutdown of its last press is
	// over (SincePress, PressOver): never on an Off or unknown reading.
	SoftToggles, HardToggles bool
	// OnToggles says that the host's power.Controller may press the power
	// button for a power-on (OnToggler). Such a power-on is persisted as a
	// press (Status.LastPress) in its versioned write, before it is sent,
	// so that a restarted controller, or another leader, counts it as a
	// press that may still land (A5).
	OnToggles bool
	// SinceRewrite and SinceLastRewrite are as SinceRequest for
	// Status.RewriteSeen and Status.LastRewriteSeen: how long this
	// controller has known those values (zero is always safe).
	SinceRewrite, SinceLastRewrite time.Duration
	// UnknownFor is how long, on a monotonic clock, the host's power has
	// read unknown without a break, up to this pass's unknown reading
	// (zero for the first unknown reading of a run, and for any other).
	// Unknown readings back off from QuickPoll to PollInterval with it
	// once a run lasts longer than PollInterval.
	UnknownFor time.Duration
	// UnsureFor is as UnknownFor for the readings that say neither On
	// nor Off (unknown or transitioning): how long they have gone on
	// without a break, up to this pass's (zero on an On or Off reading).
	// A run longer than Config.SoftTimeout + StaleReads shows no change
	// of power under way (unsureLong): a held host is powered off again,
	// a host with Online true and no hold powered on (on a Transitioning
	// reading, if that powers nothing off, and only once every
	// power-off of ours is SoftTimeout + StaleReads old, SinceOff). A
	// call answering the run answers it until the run has doubled since
	// it, at most an hour: an accepted power-on at least twice
	// SoftTimeout + StaleReads, an accepted power-off exactly that (it
	// powers nothing on), one that failed, was busy or refused at least
	// RetryDelay and at most SoftTimeout + StaleReads doubled with each
	// such answer in a row (Call.Errors); then the rule calls again
	// (TestReview36x_FencedHostDeadBMCHammeredForEver,
	// TestReview36x_StuckTransitioningRefusedPowerOnEveryRetryDelay,
	// TestReview36y_ReleasedDroppedPowerOnOffForEver,
	// TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour).
	UnsureFor time.Duration
	// UnsureWhole says UnsureFor covers the whole current run of unsure
	// readings: this controller read On or Off before it began (since
	// its start, or its Tracker's Forget). The run is then measured on
	// the monotonic clock alone, and a persisted Status.UnsureSince
	// (which may span short sane spells, or a forward step of the wall
	// clock) is not read: a short run is never taken for a long one
	// (TestReview36y_FlappingNullFalseHoldBroken,
	// TestReview36y_ClockStepDuringShortNullSpellFalseHoldBroken).
	// False (a run that began before the controller started) reads
	// UnsureSince too.
	UnsureWhole bool
	// SaneFor is as UnsureFor for the readings that say On or Off: how
	// long they have gone on without a break, up to this pass's (zero on
	// an unknown or transitioning reading). A persisted run of unsure
	// readings (Status.UnsureSince) ends only once they have lasted
	// StaleReads: a shorter one may echo a state from before the run
	// (A1).
	SaneFor time.Duration
	// SinceOff is how long, on a monotonic clock, this controller has not
	// sent a power-off to this host before Power was read: since its last
	// Off call that may have been carried out (a call refused before it
	// reached the hardware, see CallClass, does not count), counted from
	// when the call returned (or its late answer was taken, see
	// LateAnswerer): it may reach the hardware at any time up to then; or since the
	// controller started if it sent none since and a previous process may
	// have (a reboot was pending, Online=false was being enforced, or
	// had been until Online became true less than its OS shutdown ago:
	// its first soft power-off, Status.OfflineSoftSince, less than 2x
	// SoftTimeout + StaleReads old,
	// TestReview36z_RestartAfterOnlineBackDuringShutdownOffAnHour; or
	// Status.LastPress was set at its first read; if none, as long as it
	// likes). A PendingRebootSince, OfflineSince or LastPress it neither
	// wrote (nor sent in a write whose answer was lost) nor read before
	// (another leader's) counts as a power-off sent at the pass that first
	// read it; while the controller does not hold its leadership, any
	// such value (and such a recent OfflineSoftSince) counts as sent at every pass, and once it leads, no
	// earlier than its leadership began (see doc.go, Evidence).
	// Toggling power-offs read it, and the Online=false enforcement, whose
	// power-off an Off reading shows done only StaleReads after it
	// (Status.OfflineOffSeen).
	SinceOff time.Duration
	// SincePress is as SinceOff for the power-offs that may have pressed
	// the power button (Toggler; after a restart, any power-off of a
	// previous process, see Status.LastPress). PressOver says that an
	// unbroken run of Off readings taken StaleReads after the latest such
	// press returned, OffSettle long (so showing the hardware off after
	// it: its shutdown is over; unknown readings do not break the run),
	// was seen, PressOverFor how long ago (monotonic) the reading that
	// completed the run ended. A press
	// that timed out may still be carried out: its shutdown is never over
	// by a reading, only by SoftTimeout.
	SincePress   time.Duration
	PressOver    bool
	PressOverFor time.Duration
	// HardUnsupportedAt is when (the applier's clock, as Call.At) the BMC
	// answered this controller's latest hard power-off of this host
	// unsupported (power.ClassUnsupported: it offers no forced power-off,
	// e.g. a Redfish system whose reset types are On and GracefulShutdown
	// only); zero if it did not, or a hard power-off was accepted since (a
	// busy or failed answer changes nothing). For Config.ReissueAfter
	// from then, a power-off that would be hard (a held host read on, a
	// hard reboot, Online=false after SoftTimeout) is sent soft, the only
	// one the BMC offers, with an ErrNoHardPowerOff warning; then hard is
	// tried again (the answer may have been passing). It lives in memory
	// only: zero after a restart.
	HardUnsupportedAt time.Time
	// ActingSince is when, by what this controller knows, every
	// power-off and press that may still be in effect had returned (see
	// Status.ActingSince): its own calls' returns, what it counted of
	// other processes' and leaders' (its start, its leadership, a
	// Status.ActingSince it read). Zero if not known (standing by, or a
	// call still running in the background). Decide records it in the
	// status while a power-off may be in effect.
	ActingSince time.Time
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

	if !st.Pending() && len(d.Requests) > 0 {
		// A new reboot. Requests seen while one is pending join it instead.
		st.PendingRebootSince = maxTime(p, st.LastPoweredOn)
		st.Works++
		st.Mode = power.ModeSoft
		if wantHard {
			st.Mode = power.ModeHard
		}
		st.Seen, st.LastRequestSeen, st.HoldBroken = nil, time.Time{}, time.Time{}
		st.RewriteSeen, st.LastRewriteSeen, st.SoftSince = time.Time{}, time.Time{}, time.Time{}
	}
	if st.Pending() {
		c.see(d.Requests, p, st)
		if o.Changed && hasKeyed && st.LastRequestSeen.Equal(o.Status.LastRequestSeen) {
			// Someone wrote the record and the requests are as they were:
			// not a new request, but one may have been removed and added
			// again with the same value. Answered apart (rewrite.go).
			c.noteRewrite(p, st)
		}
		c.evidence(o, p, st)
	}
	if st.Pending() {
		c.pending(o, now, p, hasBare, hasKeyed, wantHard, d)
	} else {
		c.idle(o, now, p, d)
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
func (c Config) see(reqs []Request, p time.Time, st *Status) {
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
	}
	if found == len(reqs) && len(reqs) == len(st.Seen) {
		return
	}
	seen := make([]string, len(reqs))
	for i, r := range reqs {
		seen[i] = seenID(r.Name, r.Value)
	}
	slices.Sort(seen)
	st.Seen = seen
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
	d.Status.UnsureSince = time.Time{}
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
	if st.Covers() || c.releasedPending(o, run, now, hasKeyed, len(d.Requests) == 0) {
		// No keyed request left before the evidence came, on a BMC that
		// reads Transitioning for long: the evidence may never come (a
		// BMC stuck on it while the host is off), so the reboot ends as
		// a released one, by heldOff's power-on
		// (TestReview36x_FenceReleasedBeforeEvidenceOnStuckPoweringOffStaysOff,
		// TestReview36y_BareRebootOnStuckPoweringOffOffForEver).
		c.heldOff(o, now, p, hasBare, hasKeyed, d)
		return
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
		st.OfflineSince, st.OfflineMode, st.OfflineOffSeen = time.Time{}, power.ModeSoft, time.Time{}
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
		if c.wait(o.LastCall, ActionPowerOn, power.ModeSoft, now, o.Power, d) {
			return
		}
		st.LastPoweredOn, st.OnConfirmed = maxTime(p, st.LastPoweredOn), time.Time{}
		d.Power = ActionPowerOn
		d.UpdateStatus = true // a versioned write before every power-on
		d.Reason = "Online: power on"
		d.RequeueAfter = c.PollInterval
	case !o.Online && !st.OfflineOffSeen.IsZero() && (o.Power == power.StateOff || unsure):
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
