package reboot_test

import (
	"strconv"
	"testing"

	"github.com/rebootkit/rebootkit/power"
)

// TestReview36nUnknownOutcomeStatusesAreLost: besides C3h
// (TestReview36n_IPMITimeoutCompletionCodeIsNotAnAnswer), completion code
// CEh and the gateway errors HTTP 502 and 504 say the call's outcome is
// unknown: a soft shutdown so answered counts as lost (A5).
func TestReview36nUnknownOutcomeStatusesAreLost(t *testing.T) {
	for _, st := range []int{0xce, 502, 504} {
		t.Run(power.ClassBusy.String()+"-"+strconv.Itoa(st), func(t *testing.T) {
			runStatusLostSoftOff(t, &power.Error{Op: power.OpName(power.ModeSoft), Class: power.ClassBusy, Status: st,
				Message: "the outcome is unknown"})
		})
	}
}
