package reboot

// This file: a pending reboot asked by bare requests only, on a BMC that
// reads Transitioning for long after its power-off (bareStuck).

import (
	"errors"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// bareStuck decides for a pending reboot of an Online host whose only
// requests are bare (Annotation), that neither its evidence nor
// releasedPending ends: no power-off of it decided on an On or Off
// reading was accepted before the run (Status.OffOnSane). A long run of
// Transitioning readings after its own accepted power-off then shows
// nothing of that power-off: the run may predate it, the host running
// (a BMC stuck reading Transitioning while the host runs, which may
// drop a ForceOff: TestReview36z_BareRebootDoneWithoutPowerOff,
// TestReview36ab_BusyFirstOffThenStuckRunDoneWithoutPowerOff), or the
// host may be off (a BMC stuck reading it while the host is off, the
// host powered off out of band before the request, or by a power-off
// decided on such a reading:
// TestReview36ab_BareRebootAskedDuringStuckOffRunOffForEver,
// TestReview36ab_UpgradeDuringStuckPoweringOffRunOffForEver,
// TestReview36abFix_BareStuckOffOneCycle). With no request, idle's rule
// powers such a host on (releasedOn); so does the reboot, with the same
// rule (a power-on that sets the power, never on an unknown reading,
// once every power-off of ours is over, offOver, and not while a
// power-on answers the run, calledInRun), once its latest power-off was
// accepted and returned a Config.Precision tick after its latest request
// was seen (a power-off made before a request joined says nothing of
// it), without ending: Status.StuckOnDecided is written before it, and
// LastPoweredOn is not (it would end the reboot).
//
// From then on only persisted facts decide (StuckOnDecided, this
// request's, and StuckGaveUp), never what this process knows of the
// power-on's answer, so a restart or a step of the wall clock changes
// nothing. An On reading at any time after StuckOnDecided ends the
// reboot: the host is on after the power-on (annotation removed,
// LastPoweredOn written, a power-on that powers nothing off), and no
// second power cycle is made. For SoftTimeout + StaleReads after it
// (its window, on the controller's clock; a StuckOnDecided in the
// future is moved to now, repair) a reading that is neither On
// nor Off sends no power-off (the host in POST), unless the power-on
// was refused (tried again after its back-off, which starts the window
// again). Once the window has ended with no On reading the reboot gives
// up (stuckGiveUp) on a reading that is not Off; an Off reading instead
// clears StuckOnDecided and StuckGaveUp and the usual rules resume
// (the host is off: its evidence powers it on). It reports whether it
// set d. Never with a keyed request present: keyed requests hold the
// host off until they go.
func (c Config) bareStuck(o Observed, st *Status, run time.Duration, now, p time.Time, hasBare, hasKeyed bool, d *Decision) bool {
	if !hasBare || hasKeyed || !o.Online || o.OnToggles {
		return false
	}
	l := o.LastCall
	at := st.StuckOnDecided
	stuck := !at.IsZero() && !at.Before(st.PendingRebootSince)
	gaveUp := stuck && !st.StuckGaveUp.IsZero() && !st.StuckGaveUp.Before(st.PendingRebootSince)
	window := stuck && !gaveUp && now.Sub(at) < c.SoftTimeout+c.StaleReads
	onRefused := !at.IsZero() && l.Action == ActionPowerOn && l.Class != power.ClassNone && !l.At.Before(at)
	switch {
	case stuck && o.Power == power.StateOn:
		return c.bareStuckDone(st, p, d)
	case stuck && !window && o.Power == power.StateOff:
		// A sane reading after the window: the usual rules resume.
		st.StuckOnDecided, st.StuckGaveUp = time.Time{}, time.Time{}
		return false
	case stuck && !window:
		return c.stuckGiveUp(o, st, run, now, p, d)
	case window && (o.Power == power.StateUnknown || o.Power == power.StateTransitioning && !onRefused):
		// (A refused power-on is tried again below on a Transitioning
		// reading, never on an unknown one.)
		d.Phase = PhasePoweringOn
		d.Reason = "bare reboot; power-on sent on a long Transitioning run: wait for it"
		d.RequeueAfter = c.cap(min(c.PollInterval, c.SoftTimeout+c.StaleReads-now.Sub(at)))
		return true
	case o.Power != power.StateTransitioning:
		return false
	}
	offAccepted := l.Action == ActionPowerOff && l.Class == power.ClassNone && l.For.Is(st.work()) &&
		!l.At.Before(st.LastRequestSeen.Add(c.Precision))
	if !offAccepted && !onRefused {
		return false
	}
	if !c.releasedOn(o, run, now) {
		if !onRefused || !c.unsureLong(run) || !c.calledInRun(o, run, ActionPowerOn, now) {
			return false
		}
		// The power-on was refused: it is tried again after its
		// back-off (calledInRun), not replaced by a power-off.
		d.Phase = PhasePoweringOn
		d.Reason = "bare reboot; power-on on a long Transitioning run was " + l.Class.String() + ": wait"
		d.RequeueAfter = c.cap(c.PollInterval)
		return true
	}
	st.StuckOnDecided = p
	d.Power = ActionPowerOn
	d.UpdateStatus = true // a versioned write before every power-on
	d.Phase = PhasePoweringOn
	d.Reason = "bare reboot; read Transitioning for long after its power-off (the host may be off): power on (powers nothing off; the reboot stays pending)"
	d.RequeueAfter = c.QuickPoll
	return true
}

// stuckGiveUp decides for a bare reboot whose stuck power-on's window
// (bareStuck) ended with no On or Off reading: the controller cannot
// tell a host it power-cycled from one whose power-off was dropped, nor
// whether the power-on landed. It gives up (Status.StuckGaveUp, written
// once): the reboot's power-off, which would make a second power cycle,
// is never sent again for this request, and the reboot stays pending
// (annotation kept, LastPoweredOn not written). Nothing else is blocked:
// on a Transitioning reading the power-on is sent again by idle's rule
// (releasedOn: once every power-off of ours is over, backing off while
// it answers the run, calledInRun), as a power-on that sets the power
// cannot make a cycle; so a dropped power-on, a host powered off out of
// band, or one powered off by Online=false and then set Online again is
// powered on (TestReview36ad_GaveUpAfterDroppedPowerOnOffForEver,
// TestReview36ad_GaveUpHostPoweredOffOutOfBandOffForEver,
// TestReview36ad_GaveUpOnlineFalseThenTrueOffForEver). Online=false's
// enforcement and keyed requests are decided before bareStuck and are
// not held back. Every pass warns ErrStuckTransitioning (at most one a
// PollInterval but for passes others trigger), so that an operator who
// missed the first warning, or a restarted controller's logs, show it.
func (c Config) stuckGiveUp(o Observed, st *Status, run time.Duration, now, p time.Time, d *Decision) bool {
	if st.StuckGaveUp.IsZero() || st.StuckGaveUp.Before(st.PendingRebootSince) {
		st.StuckGaveUp = p
	}
	at := st.StuckOnDecided.UTC().Format(time.RFC3339)
	d.Phase = PhasePoweringOn
	d.Reason = stuckGaveUpReason(st.StuckOnDecided)
	d.Warnings = append(d.Warnings, fmt.Errorf("%w: this request's power-off was accepted and a power-on decided at %s, and the BMC has read neither On nor Off since: whether the host was power-cycled, or is on, is unknown; no further power-off for this request (power-ons still go out); fix the BMC or remove the reboot annotation",
		ErrStuckTransitioning, at))
	d.RequeueAfter = c.cap(c.PollInterval)
	if c.releasedOn(o, run, now) {
		d.Power = ActionPowerOn
		d.UpdateStatus = true // a versioned write before every power-on
		d.Reason = "bare reboot given up on (BMC reads Transitioning for ever): power on again (powers nothing off; no power-off for this request)"
	}
	return true
}

// bareStuckDone ends a bare reboot whose host read On after bareStuck's
// power-on: as heldOff ends a released one (annotation removed,
// LastPoweredOn written once the clock has passed the latest request,
// a power-on that powers nothing off).
func (c Config) bareStuckDone(st *Status, p time.Time, d *Decision) bool {
	d.Phase = PhasePoweringOn
	if latest := maxTime(maxTime(st.PendingRebootSince, st.LastRequestSeen), maxTime(st.RewriteSeen, st.LastRewriteSeen)); !p.After(latest) {
		d.Reason = "bare reboot; on after the power-on: waiting for the clock to pass the latest request"
		d.RequeueAfter = c.cap(latest.Add(c.Precision).Sub(p))
		return true
	}
	d.RemoveAnnotations = append(d.RemoveAnnotations, Annotation)
	st.Seen = nil
	st.LastPoweredOn, st.OnConfirmed = p, time.Time{}
	d.Power = ActionPowerOn
	d.UpdateStatus = true // a versioned write before every power-on
	d.Reason = "bare reboot; on after the power-on that answered a long Transitioning run (it was off): done, power on (powers nothing off)"
	d.RequeueAfter = c.PollInterval
	return true
}

// ErrStuckTransitioning is the warning Decide gives, on every pass while
// it holds, when it stops sending the power-off of a pending bare reboot
// (Status.StuckGaveUp): the BMC read neither On nor Off from the
// reboot's power-off to well after the power-on that answered it, so the
// controller cannot tell whether the host was power-cycled. Power-ons
// that set the power still go out. Fix the BMC (an On reading ends the
// reboot, an Off reading resumes it) or remove the reboot annotation.
var ErrStuckTransitioning = errors.New("reboot: the BMC reads Transitioning for ever")

// stuckGaveUpReason is the Decision.Reason of a reboot bareStuck gave up
// on, its power-on decided at at.
func stuckGaveUpReason(at time.Time) string {
	return "bare reboot; BMC reads Transitioning for ever since the power-on decided at " +
		at.UTC().Format(time.RFC3339) + ": given up, no more power-offs for this request; fix the BMC or remove the reboot annotation"
}
