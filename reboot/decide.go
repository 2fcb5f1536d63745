package reboot

import (
	"fmt"
	"slices"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Status is the reboot part of a host's status, persisted by the caller.
// Every timestamp is written from the controller's clock, truncated to
// Config.Precision, and never moved backwards.
type Status struct {
	// LastPoweredOn is the time the controller last powered the host on
	// (the seed's lastPoweredOn). Processes that ran before it are stopped.
	LastPoweredOn time.Time
	// PendingRebootSince is the time the controller first saw the current
	// reboot request (the seed's pendingRebootSince). A reboot is pending
	// while it is set and not before LastPoweredOn: a tie counts as pending,
	// because power-on is only done once the clock has passed it.
	PendingRebootSince time.Time
	// LastPoweredOff is the first time the host was observed powered off
	// since it was last powered on. Fenced uses it.
	LastPoweredOff time.Time
	// Mode is the power-off mode of the pending reboot. It only ever goes
	// from soft to hard within one reboot.
	Mode power.Mode
	// Seen lists the request annotations seen in the last pass of the pending reboot, sorted, and LastRequestSeen is when a
	// key not seen before last appeared. Power-on waits until the clock has
	// passed LastRequestSeen, so that lastPoweredOn is later than every
	// request it answers, even at one-second precision.
	Seen            []string
	LastRequestSeen time.Time
}

// Equal reports whether s and o hold the same instants and mode.
func (s Status) Equal(o Status) bool {
	return s.LastPoweredOn.Equal(o.LastPoweredOn) &&
		s.PendingRebootSince.Equal(o.PendingRebootSince) &&
		s.LastPoweredOff.Equal(o.LastPoweredOff) && s.Mode == o.Mode &&
		s.LastRequestSeen.Equal(o.LastRequestSeen) && slices.Equal(s.Seen, o.Seen)
}

// Pending reports whether a reboot is pending.
func (s Status) Pending() bool {
	return !s.PendingRebootSince.IsZero() && !s.PendingRebootSince.Before(s.LastPoweredOn)
}

// Fenced answers the fencing question of the seed: are all processes that
// ran on the host at time t guaranteed to have stopped? Yes iff the host was
// observed powered off at or after t, or was powered on strictly after t.
// Stored times are truncated (floored) to their precision, so the real event
// happened at or after the stored time; a stored LastPoweredOn equal to t
// does not count, because the power-on may have happened at t itself.
func (s Status) Fenced(t time.Time) bool {
	off := !s.LastPoweredOff.IsZero() && !s.LastPoweredOff.Before(t)
	return off || s.LastPoweredOn.After(t)
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
	// Class is the outcome (power.Classify of the error).
	Class power.Class
	// At is the applier's clock when the call returned.
	At time.Time
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
	// host, if it remembers one.
	LastCall Call
}

// Config tunes decisions. The zero value is valid: every zero field takes
// its default.
type Config struct {
	// SoftTimeout is how long a soft shutdown may take, measured from
	// PendingRebootSince, before it falls back to hard. Default 180 s (the
	// metal3 operator's value).
	SoftTimeout time.Duration
	// RetryDelay is how long to wait before retrying a power call that was
	// busy or failed. Default 10 s.
	RetryDelay time.Duration
	// PollInterval is how often to look again while waiting for the power
	// state to change. Default 5 s.
	PollInterval time.Duration
	// ReissueAfter is how long a hard power-off or a power-on that was
	// accepted may go without effect before it is sent again. Default 60 s.
	ReissueAfter time.Duration
	// Precision is the precision timestamps are stored at. Default 1 s
	// (Kubernetes metav1.Time).
	Precision time.Duration
	// Policy says which keys may request (hard) reboots. The zero value
	// allows all.
	Policy Policy
}

// DefaultConfig returns the configuration Decide uses.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.SoftTimeout <= 0 {
		c.SoftTimeout = 180 * time.Second
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
//     Observed.LastCall for the next pass.
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
	// RequeueAfter is when to decide again if nothing changes first.
	RequeueAfter time.Duration
	// Phase is where the host stands after this decision.
	Phase Phase
	// Requests are the requests that counted in this pass.
	Requests []Request
	// Warnings are problems with annotations (each an *AnnotationError);
	// report them, e.g. as Kubernetes events.
	Warnings []error
	// Reason says why, in a few words.
	Reason string
}

// Decide is DefaultConfig().Decide.
func Decide(o Observed, now time.Time) Decision { return Config{}.Decide(o, now) }

// Decide returns what to do for one host given what was observed and the
// controller's current time. It is a pure function: same input, same output.
func (c Config) Decide(o Observed, now time.Time) Decision {
	c = c.withDefaults()
	d := Decision{Status: o.Status}
	d.Requests, d.Warnings = ParseAnnotations(o.Annotations, c.Policy)
	p := now.Truncate(c.Precision)
	st := &d.Status

	if o.Deprovisioned {
		return c.deprovision(o, d)
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
		st.Mode = power.ModeSoft
		if wantHard {
			st.Mode = power.ModeHard
		}
		st.Seen, st.LastRequestSeen = nil, time.Time{}
	}
	if st.Pending() {
		seen := make([]string, 0, len(d.Requests))
		for _, r := range d.Requests {
			seen = append(seen, r.Name)
			if !slices.Contains(st.Seen, r.Name) {
				st.LastRequestSeen = maxTime(p, st.PendingRebootSince)
			}
		}
		if !slices.Equal(seen, st.Seen) {
			st.Seen = seen
		}
	}
	if o.Power == power.StateOff {
		// Record the first off observation since the last power-on (and
		// since the pending request): observed now, with the request
		// visible, it satisfies the request. The time is clamped so that
		// it never precedes what it follows, even after a clock jump.
		floor := st.LastPoweredOn
		if st.Pending() {
			floor = maxTime(floor, st.PendingRebootSince)
		}
		if st.LastPoweredOff.IsZero() || st.LastPoweredOff.Before(floor) {
			st.LastPoweredOff = maxTime(p, floor)
		}
	}
	if st.Pending() {
		c.pending(o, now, p, hasBare, hasKeyed, wantHard, &d)
	} else {
		c.idle(o, now, p, &d)
	}
	d.UpdateStatus = !d.Status.Equal(o.Status) || len(d.RemoveAnnotations) > 0
	return d
}

func (c Config) deprovision(o Observed, d Decision) Decision {
	for k := range o.Annotations {
		if IsRebootAnnotation(k) {
			d.RemoveAnnotations = append(d.RemoveAnnotations, k)
		}
	}
	slices.Sort(d.RemoveAnnotations)
	d.Requests = nil
	d.Status.PendingRebootSince = time.Time{}
	d.Status.Mode = power.ModeSoft
	d.Phase = PhaseDeprovisioned
	d.Reason = "deprovisioned: reboot requests cleared"
	d.UpdateStatus = !d.Status.Equal(o.Status) || len(d.RemoveAnnotations) > 0
	return d
}

// pending decides for a host with a pending reboot.
func (c Config) pending(o Observed, now, p time.Time, hasBare, hasKeyed, wantHard bool, d *Decision) {
	st := &d.Status
	last := o.LastCall
	mode := st.Mode
	if wantHard {
		st.Mode = power.ModeHard
	}
	if o.Power == power.StateOff {
		d.Phase = PhaseHeldOff
		if !o.Online {
			d.Reason = "off; held while Online is false"
			return
		}
		if hasBare {
			d.RemoveAnnotations = []string{Annotation}
			st.Seen = slices.DeleteFunc(slices.Clone(st.Seen), func(k string) bool { return k == Annotation })
		}
		if hasKeyed {
			d.Reason = "off; held until every keyed annotation is removed"
			return
		}
		if latest := maxTime(st.PendingRebootSince, st.LastRequestSeen); !p.After(latest) {
			// LastPoweredOn must end up later than every request it answers,
			// and is never written ahead of the clock (Fenced relies on it):
			// wait for the clock to pass them, also after a backwards jump.
			d.Reason = "off; waiting for the clock to pass the latest request"
			d.RequeueAfter = c.cap(latest.Add(c.Precision).Sub(now))
			return
		}
		if c.wait(last, ActionPowerOn, power.ModeSoft, now, d) {
			return
		}
		st.LastPoweredOn = p
		st.Seen = nil
		d.Power = ActionPowerOn
		d.Phase = PhasePoweringOn
		d.Reason = "off and released: power on"
		d.RequeueAfter = c.PollInterval
		return
	}

	d.Phase = PhasePoweringOff
	if st.Mode == power.ModeSoft {
		softFailed := last.Action == ActionPowerOff && last.Mode == power.ModeSoft &&
			(last.Class == power.ClassUnsupported || last.Class == power.ClassFailed)
		elapsed := now.Sub(st.PendingRebootSince)
		switch {
		case softFailed:
			st.Mode = power.ModeHard
			d.Reason = "soft power-off " + last.Class.String() + ": fall back to hard"
		case elapsed >= c.SoftTimeout:
			st.Mode = power.ModeHard
			d.Reason = "soft power-off timed out: fall back to hard"
		}
	}
	if st.Mode == power.ModeHard && mode == power.ModeSoft && d.Reason == "" {
		d.Reason = "hard reboot requested: escalate"
	}
	if o.Power == power.StateTransitioning && st.Mode == mode {
		d.Reason = "powering off: wait"
		d.RequeueAfter = c.PollInterval
		return
	}
	if c.wait(last, ActionPowerOff, st.Mode, now, d) {
		if st.Mode == power.ModeSoft {
			d.RequeueAfter = min(d.RequeueAfter, c.cap(st.PendingRebootSince.Add(c.SoftTimeout).Sub(now)))
		}
		return
	}
	d.Power = ActionPowerOff
	d.Mode = st.Mode
	if d.Reason == "" {
		d.Reason = "reboot requested: power off " + st.Mode.String()
	}
	d.RequeueAfter = c.PollInterval
}

// idle decides for a host with no pending reboot: power follows Online.
func (c Config) idle(o Observed, now, p time.Time, d *Decision) {
	st := &d.Status
	d.Phase = PhaseIdle
	switch {
	case o.Power == power.StateUnknown || o.Power == power.StateTransitioning:
		d.Reason = "power state " + o.Power.String() + ": wait"
		d.RequeueAfter = c.PollInterval
	case o.Online && o.Power == power.StateOff:
		if c.wait(o.LastCall, ActionPowerOn, power.ModeSoft, now, d) {
			return
		}
		st.LastPoweredOn = maxTime(p, st.LastPoweredOn)
		d.Power = ActionPowerOn
		d.Reason = "Online: power on"
		d.RequeueAfter = c.PollInterval
	case !o.Online && o.Power == power.StateOn:
		mode := power.ModeSoft
		last := o.LastCall
		if last.Action == ActionPowerOff && (last.Mode == power.ModeHard ||
			last.Class == power.ClassUnsupported || last.Class == power.ClassFailed ||
			last.Class == power.ClassNone && now.Sub(last.At) >= c.SoftTimeout) {
			mode = power.ModeHard
		}
		if c.wait(last, ActionPowerOff, mode, now, d) {
			return
		}
		d.Power = ActionPowerOff
		d.Mode = mode
		d.Reason = "Online is false: power off " + mode.String()
		d.RequeueAfter = c.PollInterval
	default:
		d.Reason = "power matches Online"
	}
}

// wait reports whether the last call (same action and mode) should be
// given time rather than repeated now; if so it sets the requeue.
func (c Config) wait(last Call, a Action, m power.Mode, now time.Time, d *Decision) bool {
	if last.Action != a || (a == ActionPowerOff && last.Mode != m) {
		return false
	}
	var delay time.Duration
	switch last.Class {
	case power.ClassNone:
		if a == ActionPowerOff && m == power.ModeSoft {
			// A soft shutdown runs until it is done or times out.
			d.Reason = "soft power-off under way: wait"
			d.RequeueAfter = c.PollInterval
			return true
		}
		delay = c.ReissueAfter
	case power.ClassBusy, power.ClassFailed:
		delay = c.RetryDelay
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
		d.RequeueAfter = min(d.RequeueAfter, c.PollInterval)
	}
	return true
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
