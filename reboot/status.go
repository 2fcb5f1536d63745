package reboot

// This file: what is kept of a host (Status) and what a pass observes
// of it (Observed, Call).

import (
	"slices"
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
	// sent; the power-on a pending bare reboot sends on a long run of
	// Transitioning readings, which leaves it pending (bareStuck), is not
	// recorded (it would end the reboot). A client's bare reboot is done when its annotation is gone and
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
	// it in OfflineOffSeen instead. With Online true again the
	// enforcement is over: OfflineSince and OfflineMode are cleared, so
	// that a later Online=false begins a new one, soft first
	// (TestReview40aq_OnlineFalseAgainAfterUnreadableOnlineTrueCutHardAtOnce),
	// and OfflineOffSeen is kept (see there) as the power-on owed.
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
	// while the enforcement's power-off is not known done. With Online
	// true again (OfflineSince cleared) it is set, to OfflineSince if it
	// was zero, as the record that the host was powered off for
	// Online=false and is owed a power-on, until the power-on is decided
	// or an On reading that cannot echo shows the host on: it keeps the
	// host busy (Result.Busy) while a pass cannot power it on yet
	// (TestReview40ap_OnlineTrueAgainWhileBMCUnreadableLeftOffForGood).
	// Without OfflineSince it holds nothing off: a later Online=false
	// begins a new enforcement
	// (TestReview40aq_OnlineFalseAgainHostPoweredOnMeanwhileHeldAsOff).
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
	// TestReview36z_RestartDuringFlappingNullFalseHoldBroken), and only
	// if the status says no On or Off reading came since
	// (UnsureUnbroken), so that
	// restarts every few minutes do not keep a held host that
	// someone else powered on running for ever
	// (TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes) nor a
	// released one off for ever
	// (TestReview36x_ReleasedOnStuckPoweringOffRestartsEveryThreeMinutes);
	// such a controller reads it on the wall clock (a forward step
	// lengthens the run) and, kept through short sane spells no
	// controller read (while none ran), it may span several runs. Zero
	// otherwise.
	UnsureSince time.Time
	// UnsureInterrupted says that a reading said On or Off after the run
	// UnsureSince dates began (a sane spell too short to clear it, see
	// above): UnsureSince may then be earlier than the current run's
	// start, and a controller that did not see the current run begin
	// does not count from it (it would take several short runs for one
	// long one, and record a HoldBroken on a host off all along:
	// TestReview36aa_RestartEarlyInLongerFlappingNullFalseHoldBroken).
	// It is written once, at the first such reading, not at every
	// spell of a flapping BMC; UnsureSince is written again, and this
	// cleared, by a controller that has itself read unsure readings for
	// half of SoftTimeout + StaleReads without seeing the run begin (from
	// its first such reading: a restart's), or that saw the whole run
	// last SoftTimeout + StaleReads. Cleared with UnsureSince.
	UnsureInterrupted bool
	// UnsureUnbroken says that UnsureSince dates the current run: it is
	// set with every UnsureSince written, and cleared with
	// UnsureInterrupted's first reading and with UnsureSince. Only then
	// does a controller that did not see the run begin count from
	// UnsureSince. A status without it (an older version's, which wrote
	// UnsureSince but no UnsureInterrupted, or one that lost that mark)
	// is so not counted from until the controller writes its own run
	// anew, as above
	// (TestReview36ab_UpgradeEarlyInLongerFlappingNullFalseHoldBroken).
	UnsureUnbroken bool
	// OfflineSoftSince is, for the Online=false enforcement, what
	// SoftSince is for a pending reboot: when its first soft power-off
	// was decided; OfflineMode falls back to hard SoftTimeout after it.
	OfflineSoftSince time.Time
	// HoldBroken is when the controller first read On, since the evidence
	// LastPoweredOff last moved, for a host it held off with evidence
	// covering every request, or, with a keyed request present, covering
	// the requests seen first while requests that joined later wait for
	// theirs (those clients then see it too): someone else powered it
	// on (TestReview36ab_HeldHostPoweredOnWhileSecondFenceJoinsNoHoldBroken).
	// The controller
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
	// Online may have flipped back meanwhile and the enforcement ended
	// (OfflineSince cleared), while the OS still shuts down. It is cleared once no reading can echo a
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
	// unknown. Only a status of Format 1 or later is read so: an older
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
	// OffOnSane is when a power-off of the pending reboot that the BMC
	// then accepted (Observed.LastCall: answered with no error, for this
	// reboot) was decided, in a pass whose reading said On or Off
	// (truncated to Config.Precision); zero, or earlier than
	// PendingRebootSince (an earlier reboot's), while none was. The
	// passes after the call take it from OffOnSaneDecided while their
	// last call is that one, and write it with the first Status write
	// they make for another reason or before another power call (no
	// write of its own): a power-off refused (busy, failed, never sent) or not made (a crash
	// between the status write and the call) never sets it
	// (TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff). A run
	// of unsure readings under way after it began after that reading,
	// and after a power-off the BMC took, so maybe because of it: a
	// pending reboot with only a bare request left ends as a released
	// one on a long run of Transitioning readings if it is set (see
	// doc.go, and Config: releasedPending). Persisted, and clock-free,
	// so that neither a restart, nor a power-off repeated later in the
	// run, nor a step of the wall clock loses it
	// (TestReview36aa_BareRebootStuckPoweringOffRestartOffForEver,
	// TestReview36aa_BareRebootStuckPoweringOffLostAnswerOffForEver,
	// TestReview36aa_BareRebootStuckPoweringOffClockBackOffForEver). A
	// status of a Format below 2 (whose OffOnSane was written before the
	// call, whatever its answer) has it dropped. A request that joins the
	// reboot clears it (and OffOnSaneDecided): a power-off before it
	// says nothing of it.
	OffOnSane time.Time
	// OffOnSaneDecided is, while OffOnSane is not set, when a power-off
	// of the pending reboot was decided in a pass whose reading said On
	// or Off (truncated), written in the versioned write before the call;
	// power-offs decided later on such readings keep it, and one decided
	// on a reading that says neither clears it (its call, accepted, shows
	// nothing of a run already under way). The pass after a call the BMC
	// accepted, decided for this reboot (Call.For) and returned at or
	// after it (Call.At), moves it to OffOnSane: that call is the latest
	// power-off's. Zero otherwise.
	OffOnSaneDecided time.Time
	// StuckOnDecided is when a pending reboot asked by bare requests
	// only last decided the power-on that answers a long run of
	// Transitioning readings after its power-off without ending it
	// (bareStuck), written in the versioned write before it is sent;
	// zero, or earlier than PendingRebootSince, otherwise, and cleared
	// when a request joins or an Off reading comes after its window.
	// An On reading at any time after it ends the reboot: the host was
	// off (no second power cycle). For SoftTimeout + StaleReads after it
	// (its window, on the controller's clock, so also after a restart) a
	// reading neither On nor Off sends no power-off (the host in POST);
	// after that window such a reading gives the reboot up
	// (StuckGaveUp), whether or not the power-on's answer is known.
	StuckOnDecided time.Time
	// StuckGaveUp is when bareStuck gave up on the pending reboot: the
	// window of its power-on (StuckOnDecided, this reboot's) ended with
	// the BMC reading neither On nor Off. While it is set, not earlier
	// than PendingRebootSince, the reboot's power-off is never sent again
	// (it could make a second power cycle): the reboot stays pending
	// (annotation kept, LastPoweredOn not written) and Decide warns
	// ErrStuckTransitioning, while power-ons that set the power still go
	// out on Transitioning readings. An On reading ends the reboot, an
	// Off reading clears it (and StuckOnDecided) and the usual rules
	// resume; so do a request that joins and the end of the reboot.
	// Zero otherwise.
	StuckGaveUp time.Time
	// Format is the format of the status: StatusFormat in every status
	// this version writes (with anything else in it), zero in one written
	// before every press was recorded in LastPress (power-offs and
	// pressing power-ons). A controller takes a zero LastPress
	// as "no press may still land" only in a status of Format 1 or
	// later; in an older one a pending reboot, an Online=false enforcement, or a
	// LastPoweredOn on a controller whose power-on may press (OnToggler)
	// counts as a press a previous process may have sent, in every pass
	// that reads it (a restart's first, a standby's, a new leader's)
	// (TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn,
	// TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn,
	// TestReview36s_RollingUpgradeHandoverPowersHeldHostOn). Format 1
	// recorded every press; format 2 (StatusFormat) writes OffOnSane
	// only for a power-off the BMC accepted: an older status's OffOnSane
	// is dropped.
	Format int
}

// StatusFormat is the Status.Format this version writes.
const StatusFormat = 2

// formatPresses is the first Status.Format that records every press in
// Status.LastPress and bounds the calls it shows by Status.ActingSince.
const formatPresses = 1

// formatSaneOff is the first Status.Format whose OffOnSane says the
// power-off was accepted.
const formatSaneOff = 2

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
		s.SoftSince.Equal(o.SoftSince) && s.OfflineSoftSince.Equal(o.OfflineSoftSince) && s.Format == o.Format &&
		s.UnsureInterrupted == o.UnsureInterrupted && s.OffOnSane.Equal(o.OffOnSane) &&
		s.UnsureUnbroken == o.UnsureUnbroken && s.OffOnSaneDecided.Equal(o.OffOnSaneDecided) &&
		s.StuckOnDecided.Equal(o.StuckOnDecided) && s.StuckGaveUp.Equal(o.StuckGaveUp)
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

// answered reports whether the fencing evidence answers some request of
// the pending reboot: it covers PendingRebootSince, when the requests
// seen first were seen (a request seen later may not be covered).
func (s Status) answered() bool {
	return s.Pending() && !s.LastPoweredOff.IsZero() && !s.LastPoweredOff.Before(s.PendingRebootSince)
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
	// powers nothing on), one that failed or got no answer at least
	// RetryDelay and at most SoftTimeout + StaleReads doubled with each
	// such answer in a row (Call.Errors); one the BMC answered busy or
	// that was refused before it was sent (busy with Call.Fails zero: not
	// carried out, no sign of a dead BMC) RetryDelay doubled with each
	// such answer in a row, at most ReissueAfter, whatever the run's
	// length; then the rule calls again
	// (TestReview36x_FencedHostDeadBMCHammeredForEver,
	// TestReview36x_StuckTransitioningRefusedPowerOnEveryRetryDelay,
	// TestReview36y_ReleasedDroppedPowerOnOffForEver,
	// TestReview36y_ReleasedAfterLongRunOneBusyOffAnHour,
	// TestReview36ab_HeldHostOnStuckTwoBusyRunsTwelveMinutes).
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
