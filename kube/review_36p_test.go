package kube

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36p_ResetAnsweredCEhCountsAsRefused (review 36 round 16): IPMI
// completion code CEh ("command response could not be provided") says the
// BMC has no answer for the call, not that it refused it: the reset may
// have been carried out (power/errors.go Error.Answered, used by package
// reboot and the Redfish adapter; power/ipmi unknownCodes). The reset
// path keeps its own list (resetdecide.go:90: 502, 504, C3h only), so a
// reset answered CEh is "refused": it does not count (Resets-1) and is
// sent again RetryDelay later, for ever. A BMC that carries out every
// reset and answers CEh (its response path broken, as on NC-SI hardware
// where the reset takes the BMC's port down) resets the host every
// RetryDelay with no end, where the documented bound is maxResets (2)
// resets per request, then GaveUp. Fix: resetRefused should say
// !pe.Answered() is not a refusal (share power.Error.Answered).
func TestReview36p_ResetAnsweredCEhCountsAsRefused(t *testing.T) {
	c := resetConfigOf(reboot.DefaultConfig())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := resetObserved{Requested: true, Online: true, Power: power.StateOn}
	ceh := &power.Error{Op: "reset", Class: power.ClassBusy, Status: 0xce,
		Message: "command response could not be provided"}
	if resetRefused(ceh) {
		t.Errorf("resetRefused(CEh) = true: a reset answered CEh may have been carried out (power.Error.Answered() = %v)", ceh.Answered())
	}
	resets := 0
	for end := now.Add(30 * time.Minute); now.Before(end); {
		d := decideReset(o, c, now)
		if d.Write {
			o.Rec = d.Rec
		}
		if d.Done || d.Clear {
			break
		}
		if d.Call == "reset" {
			resets++ // the BMC carries it out (the host reboots) and answers CEh
			o.Outcome = &resetOutcome{at: now, err: ceh}
		}
		now = now.Add(max(d.After, time.Second))
	}
	if resets > maxResets {
		t.Fatalf("a BMC that carries out every reset and answers CEh was reset %d times in 30 minutes for one request (bound %d, then GaveUp)", resets, maxResets)
	}
}
