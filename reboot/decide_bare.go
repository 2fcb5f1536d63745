package reboot

// This file: a pending reboot asked by bare requests only, on a BMC that
// reads Transitioning for long after its power-off (bareStuck).

import (
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
// TestReview36ab_UpgradeDuringStuckPoweringOffRunOffForEver). With no
// request, idle's rule powers such a host on (releasedOn); so does the
// reboot, with the same rule (a power-on that sets the power, never on
// an unknown reading, once the power-off is over, offOver, and not
// while a power-on answers the run, calledInRun), without ending: the
// power-on is decided for the reboot (Decision.For), and LastPoweredOn
// is not written (it would end the reboot). While it may still be under
// way (SoftTimeout + StaleReads after it returned, accepted), a
// Transitioning reading sends no power-off (the host in POST). A host
// that reads On in that time was off (the BMC read Transitioning while
// it was off): the reboot is done, as by its evidence (annotation
// removed, LastPoweredOn written, a power-on sent that powers nothing
// off), and no second power cycle is made; a host that still reads
// Transitioning then is sent the reboot's power-off again. It reports
// whether it set d. Never with a keyed request present: keyed requests
// hold the host off until they go.
func (c Config) bareStuck(o Observed, st *Status, run time.Duration, now, p time.Time, hasBare, hasKeyed bool, d *Decision) bool {
	if !hasBare || hasKeyed || !o.Online || o.OnToggles {
		return false
	}
	l, w := o.LastCall, st.work()
	mine := l.Action == ActionPowerOn && l.For.Is(w)
	since := now.Sub(l.At)
	window := mine && l.Class == power.ClassNone && since >= 0 && since < c.SoftTimeout+c.StaleReads
	switch {
	case window && o.Power == power.StateOn:
		return c.bareStuckDone(o, st, p, d)
	case window && o.Power == power.StateTransitioning:
		d.Phase = PhasePoweringOn
		d.Reason = "bare reboot; power-on sent on a long Transitioning run: wait for it"
		d.RequeueAfter = c.cap(min(c.PollInterval, c.SoftTimeout+c.StaleReads-since))
		return true
	case o.Power != power.StateTransitioning:
		return false
	}
	offAccepted := l.Action == ActionPowerOff && l.Class == power.ClassNone && l.For.Is(w)
	onRefused := mine && l.Class != power.ClassNone
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
	d.Power, d.For = ActionPowerOn, w
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
func (c Config) bareStuckDone(o Observed, st *Status, p time.Time, d *Decision) bool {
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
