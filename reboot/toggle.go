package reboot

import (
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Toggler is an optional interface of a power.Controller whose power-off
// may press the power button instead of setting the power (Redfish
// PushPowerButton on a BMC with no graceful or forced reset type; IPMI
// soft shutdown, which some BMCs implement as a press). A press sent to a
// host that is off powers it on, so the Reconciler tells Decide
// (Observed.SoftToggles, HardToggles), which sends such a power-off only
// on a reading that cannot be an echo (see Observed.SinceOff).
// Controllers that do not implement it never toggle on Off.
type Toggler interface {
	// TogglesOff reports whether Off in mode m may be a press of the
	// power button.
	TogglesOff(m power.Mode) bool
}

// OnToggler is an optional interface of a power.Controller whose power-on
// may press the power button (Redfish PushPowerButton on a BMC with no On
// or ForceOn reset type). Such a power-on whose answer was lost may land
// late (assumption A5) on a host that runs by then, as a press that shuts
// it down: the Reconciler and the Tracker count it as a press sent
// Config.LostLanding after its return (Observed.SinceOff, SincePress).
// Controllers that do not implement it never toggle on On.
type OnToggler interface {
	// TogglesOn reports whether On may be a press of the power button.
	TogglesOn() bool
}

// togglesOn reports whether pc's power-on may press the button.
func togglesOn(pc power.Controller) bool {
	t, ok := pc.(OnToggler)
	return ok && t.TogglesOn()
}

// sentOn notes the outcome err of a power-on that returned at done: one
// that may be a press (press) and whose answer was lost counts as a press
// that may land until LostLanding after done (A5), and, as any press
// (sendingOff), it voids what was known of the shutdown of earlier ones:
// Off readings taken before it lands show nothing of the shutdown it may
// start (PressOver,
// TestReview36o_LostPowerOnPressSlowShutdownPressesOnEcho). One still
// running in the background (answered busy: kube.Async) is the call in
// flight a late answer settles (memory.late,
// TestReview36o_LateLostPowerOnPressCountsFromPass).
//
// Any power-on that may have reached the hardware counts from its return
// too (lastOn, which QuietFor counts from; noted before the call as
// well): the BMC may carry it out as it answers, so an Off reading taken
// less than StaleReads after the return may echo the state before it (A5:
// an answered call counts from its return;
// TestReview36ag_SlowPowerOnPressPressedAgainOnEcho).
func (h *memory) sentOn(press bool, err error, done time.Duration) {
	if !notCarriedOut(err) {
		h.lastOn = max(h.lastOn, done)
	}
	if !press || !answerLost(err) {
		return
	}
	fly := h.lost.mayFly(err)
	h.lost.note(true, done, fly)
	if fly {
		h.lost.flight.on = true
	}
	h.off.pressed(done)
}

// pressed notes a press that may have been sent until at: what was known
// of the shutdown of earlier presses no longer holds.
func (o *offState) pressed(at time.Duration) {
	*o = offState{lastOff: max(o.lastOff, at), lastPress: max(o.lastPress, at)}
}

// toggles reports whether a power-off in mode m may press the button.
func (o Observed) toggles(m power.Mode) bool {
	if m == power.ModeHard {
		return o.HardToggles
	}
	return o.SoftToggles
}

// pressWait says whether a power-off in mode m must not be sent in this
// pass because it may press the power button of a host that may be off,
// and how long until this pass's kind of reading could allow it. A press
// goes out only on an On reading taken when no earlier call of this
// controller can still be changing the power, and which cannot echo a
// state from before such a change (a reading shows a state up to
// StaleReads old):
//
//   - after a power-on, or a power-off that cannot press (a forced one),
//     StaleReads after it (QuietFor, SinceOff);
//   - after a press for a power-off (SincePress), the OS may shut down
//     until SoftTimeout: StaleReads after that, unless an unbroken run of
//     Off readings taken StaleReads after the press, OffSettle long (so
//     showing the hardware off after it: the shutdown is over), came
//     first (PressOver); then StaleReads after that run (PressOverFor).
//
// Any other reading (Off, unknown, transitioning, or an On that may echo
// the state before our own call) sends nothing: a press to a host that is
// off powers it on.
func (c Config) pressWait(o Observed, m power.Mode) (time.Duration, bool) {
	if !o.toggles(m) {
		return 0, false
	}
	wait := c.pressTimer(o)
	if o.Power != power.StateOn {
		return max(wait, c.PollInterval), true
	}
	return wait, wait > 0
}

// pressTimer is the part of pressWait that does not depend on the
// reading: how long a press must wait for the controller's own earlier
// calls (and their shutdowns) to be over.
func (c Config) pressTimer(o Observed) time.Duration {
	wait := max(c.StaleReads-o.SinceOff, c.StaleReads-o.QuietFor, 0)
	if o.PressOver {
		return max(wait, c.StaleReads-o.PressOverFor)
	}
	return max(wait, c.SoftTimeout+c.StaleReads-o.SincePress)
}

// softSent reports whether the pending reboot's soft power-off was
// decided (Status.SoftSince, not an earlier reboot's).
func (s Status) softSent() bool {
	return softSent(s.PendingRebootSince, s.SoftSince)
}

// softSent reports whether softSince, the first soft power-off decided
// for a work begun at since (Status.SoftSince, OfflineSoftSince), is this
// work's: set, and not earlier than it.
func softSent(since, softSince time.Time) bool {
	return !softSince.IsZero() && !softSince.Before(since)
}

// softDue returns when a soft work begun at since (a pending reboot, an
// Online=false enforcement) whose first soft power-off was decided at
// softSince escalates to hard by time: SoftTimeout after that power-off,
// or, none decided yet, after since (see softTimedOut).
func (c Config) softDue(since, softSince time.Time) time.Time {
	if softSent(since, softSince) {
		return softSince.Add(c.SoftTimeout)
	}
	return since.Add(c.SoftTimeout)
}

// softTimedOut reports whether a soft work begun at since (a pending
// reboot, an Online=false enforcement) escalates to hard at now for its
// time: SoftTimeout after its first soft power-off was decided
// (softSince: Status.SoftSince, OfflineSoftSince; one refused or busy
// counts, issue 36 point 3). Before one was, after since, but only if the
// soft power-off cannot go out for its reading (an unknown, Off or
// transitioning reading of a BMC whose soft power-off presses: the hard
// one may not press, and is sent whatever the reading): not while the
// controller's own waits hold it back (landWait, pressTimer), nor once
// they are over on a reading it may go out on. A soft work is so never
// cut hard before its soft power-off had SoftTimeout, unless the BMC's
// readings keep it from being sent
// (TestReview36t_UpgradeIdleHostSoftRebootHeldSixMinutesThenCutHard,
// TestReview36tFix_HeldBackSoftRebootTriedSoftFirst,
// TestReview36tFix_HeldBackOfflineTriedSoftFirst).
func (c Config) softTimedOut(o Observed, since, softSince, now time.Time) bool {
	if now.Before(c.softDue(since, softSince)) {
		return false
	}
	if softSent(since, softSince) {
		return true
	}
	soft := c.offMode(o, power.ModeSoft, now)
	if _, no := c.landWait(o); no || o.toggles(soft) && c.pressTimer(o) > 0 {
		return false
	}
	_, no := c.pressWait(o, soft)
	return no
}

// mayPress reports whether a power call of this controller may press the
// host's power button (a soft or hard power-off, or a power-on).
func (o Observed) mayPress() bool { return o.SoftToggles || o.HardToggles || o.OnToggles }

// showsPress reports whether s shows a press that may still land: a
// Status.LastPress, or a press s may hide (hidesPress). onToggles is the
// controller's OnToggler answer (Observed.OnToggles).
func (s Status) showsPress(onToggles bool) bool {
	return !s.LastPress.IsZero() || s.hidesPress(onToggles)
}

// hidesPress reports whether s, a status of an older format
// (Status.Format below 1: written before every press was
// recorded in LastPress), may hide a press a previous process sent: it
// has no LastPress and shows a pending reboot, an Online=false
// enforcement (OfflineSince), or, on a controller whose power-on may
// press (onToggles), a power-on (LastPoweredOn: a pressing power-on ends
// the reboot, so its status shows nothing else)
// (TestReview36r_UpgradeFromStatusWithoutLastPressPowersHeldHostOn,
// TestReview36s_UpgradeAfterLostPowerOnPressPowersHeldHostOn).
func (s Status) hidesPress(onToggles bool) bool {
	return s.Format < formatPresses && s.LastPress.IsZero() &&
		(s.Pending() || !s.OfflineSince.IsZero() || onToggles && !s.LastPoweredOn.IsZero())
}

// landWait says whether no power-off at all may be sent in this pass,
// pressing or not, and for how long: a press whose answer was lost (or
// that this controller did not see answered: a previous process's or
// another leader's) may still land until SincePress reaches zero (A5). A
// power-off sent before then, even one that sets the power (a forced
// power-off: the hard fallback of a soft press on an iLO-like BMC), may
// leave the host off when the press lands, and the press powers it on
// while it is held (TestReview36p_LostSoftPressLandsAfterHardOffPowersHeldHostOn).
// Once it has landed, on a host that ran, it starts a shutdown that the
// power-off only hastens. A controller that never presses (no Toggler or
// OnToggler answering yes) sends no press: it never waits.
func (c Config) landWait(o Observed) (time.Duration, bool) {
	if !o.mayPress() || o.SincePress >= 0 {
		return 0, false
	}
	return -o.SincePress, true
}

// pressSettled reports whether the shutdown of this controller's last
// press is over and no reading can echo a state from before it: StaleReads
// after the Off reading that showed it over, or SoftTimeout + StaleReads
// after the press.
func (c Config) pressSettled(o Observed) bool {
	return o.PressOver && o.PressOverFor >= c.StaleReads || o.SincePress >= c.SoftTimeout+c.StaleReads
}

// onPressWait says whether a power-on must not be sent in this pass
// because it may press the power button (OnToggles) of a host that may
// run, and how long until it could be: issue 36 item 1, the rule
// pressWait applies to power-offs, the other way round. A press goes out
// only on an Off reading that cannot be an echo of a state from before a
// change this controller's calls may have made: StaleReads after its
// last power-on (QuietFor) and after its last press may have landed
// (SincePress, a lost one counted as sent LostLanding after its return),
// and never while a press whose answer was lost may still land
// (landWait): the host it powers on would be shut down by the late one
// (TestReview36af_IdleSecondPowerOnPressWhileLostOneMayLand). An On,
// unknown or transitioning reading sends nothing: the press would shut a
// running host down (TestReview36af_ReleasedOnHostPressedOff). A power-on
// that sets the power never waits here.
func (c Config) onPressWait(o Observed) (time.Duration, bool) {
	if !o.OnToggles {
		return 0, false
	}
	if w, no := c.landWait(o); no {
		return w, true
	}
	wait := max(c.StaleReads-o.QuietFor, c.StaleReads-o.SincePress, 0)
	if o.Power != power.StateOff {
		return max(wait, c.PollInterval), true
	}
	return wait, wait > 0
}
