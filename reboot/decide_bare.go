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
// LastPoweredOn is not (it would end the reboot). For SoftTimeout +
// StaleReads after StuckOnDecided a Transitioning reading sends no
// power-off (the host in POST), unless the power-on was refused (tried
// again after its back-off), and a host that reads On in that time, or
// at any time after the power-on was accepted, was off (the BMC read
// Transitioning while it was off): the reboot is done, as by its
// evidence (annotation removed, LastPoweredOn written, a power-on that
// powers nothing off), and no second power cycle is made. A host that
// still reads Transitioning after that time, the power-on accepted, is
// given up on (Status.StuckGaveUp, ErrStuckTransitioning): no further
// power call for the reboot, which stays pending, until an On or Off
// reading clears it and the usual rules resume (an On reading is no
// evidence: the power-off goes out again). With the power-on's answer
// unknown (a restart) the reboot's power-off goes out again. It reports
// whether it set d. Never with a keyed request
// present: keyed requests hold the host off until they go.
func (c Config) bareStuck(o Observed, st *Status, run time.Duration, now, p time.Time, hasBare, hasKeyed bool, d *Decision) bool {
	if !hasBare || hasKeyed || !o.Online || o.OnToggles {
		return false
	}
	l := o.LastCall
	at := st.StuckOnDecided
	stuck := !at.IsZero() && !at.Before(st.PendingRebootSince)
	window := stuck && !now.Before(at) && now.Sub(at) < c.SoftTimeout+c.StaleReads
	onRefused := !at.IsZero() && l.Action == ActionPowerOn && l.Class != power.ClassNone && !l.At.Before(at)
	// The power-on bareStuck decided for this reboot was accepted: an On
	// reading after it ends the reboot and a Transitioning one sends no
	// power-off, whatever the wall clock says
	// (TestReview36ac_BareStuckClockStepForwardSecondCycle).
	onAccepted := stuck && l.Action == ActionPowerOn && l.Class == power.ClassNone && !l.At.Before(at)
	if g := st.StuckGaveUp; !g.IsZero() && !g.Before(st.PendingRebootSince) {
		if o.Power == power.StateOn || o.Power == power.StateOff {
			// A sane reading: the usual rules resume (an On reading is
			// no evidence of its own).
			st.StuckGaveUp = time.Time{}
			return false
		}
		d.Phase = PhasePoweringOff
		d.Reason = stuckGaveUpReason(at)
		d.RequeueAfter = c.cap(c.PollInterval)
		return true
	}
	switch {
	case (window || onAccepted) && o.Power == power.StateOn:
		return c.bareStuckDone(st, p, d)
	case (window || onAccepted && now.Before(at)) && o.Power == power.StateTransitioning && !onRefused:
		d.Phase = PhasePoweringOn
		d.Reason = "bare reboot; power-on sent on a long Transitioning run: wait for it"
		d.RequeueAfter = c.cap(min(c.PollInterval, c.SoftTimeout+c.StaleReads-now.Sub(at)))
		return true
	case onAccepted && o.Power == power.StateTransitioning:
		// Its window ended and the BMC never read On or Off: the
		// controller cannot tell a host it power-cycled from one whose
		// power-off was dropped. No more power calls for this reboot
		// (TestReview36ac_AlwaysTransitioningBareRebootCyclesForEver).
		st.StuckGaveUp = p
		d.Phase = PhasePoweringOff
		d.Reason = stuckGaveUpReason(at)
		d.Warnings = append(d.Warnings, fmt.Errorf("%w: power-cycled once for this request at %s; fix the BMC or remove the reboot annotation",
			ErrStuckTransitioning, at.UTC().Format(time.RFC3339)))
		d.RequeueAfter = c.cap(c.PollInterval)
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

// ErrStuckTransitioning is the warning Decide gives when it stops making
// power calls for a pending bare reboot (Status.StuckGaveUp): the BMC read
// Transitioning, never On or Off, from the reboot's power-off to well after
// the power-on that answered it, so the controller cannot tell whether the
// host was power-cycled. Fix the BMC (an On or Off reading resumes the
// reboot) or remove the reboot annotation.
var ErrStuckTransitioning = errors.New("reboot: the BMC reads Transitioning for ever")

// stuckGaveUpReason is the Decision.Reason of a reboot bareStuck gave up
// on, its power-on decided at at.
func stuckGaveUpReason(at time.Time) string {
	return "bare reboot; BMC reads Transitioning for ever; power-cycled once for this request at " +
		at.UTC().Format(time.RFC3339) + ": no more power calls; fix the BMC or remove the reboot annotation"
}
