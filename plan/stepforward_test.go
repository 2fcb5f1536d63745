package plan

import (
	"errors"
	"testing"
)

// TestCheckStepForwardTransitions lists the step changes a stored reboot
// may take in a written view: every one a pass makes (over any number of
// passes) is allowed, and releasing a reboot whose job was seen, or
// moving an ended one, is refused (issue 37, review round 12).
func TestCheckStepForwardTransitions(t *testing.T) {
	cases := []struct {
		from, to Step
		seen     bool
		ok       bool
	}{
		{StepPending, StepWaitHead, false, true},
		{StepPending, StepReleased, false, true},
		{StepWaitHead, StepReleased, false, true},
		{StepFreeze, StepReleased, false, true},
		{StepJob, StepReleased, false, true}, // lost after ShowTimeout, then released in one pass
		{StepJob, StepWaitHead, false, true},
		{StepFreeze, StepWaitHead, false, true},
		{StepJob, StepServices, true, true},
		{StepJob, StepCancelJob, true, true},
		{StepCancelJob, StepFailed, true, true},
		{StepFailFreeze, StepFailed, true, true},
		{StepUnfreeze, StepDone, true, true},
		{StepServices, StepDone, true, true},
		{StepJob, StepReleased, true, false},
		{StepWaitHead, StepReleased, true, false},
		{StepServices, StepReleased, true, false},
		{StepCancelJob, StepReleased, true, false},
		{StepUnfreeze, StepReleased, false, false},
		{StepDone, StepJob, true, false},
		{StepFailed, StepReleased, true, false},
		{StepReleased, StepWaitHead, false, false},
		{StepReleased, StepPending, false, false},
		{StepJob, StepPending, false, false},
	}
	for _, c := range cases {
		stored := Reboot{ServerHostname: "node1", Step: c.from, JobSeen: c.seen}
		next := stored
		next.Step = c.to
		err := CheckStepForward("p", 0, stored, next)
		if c.ok && err != nil {
			t.Errorf("%q -> %q (seen %v): refused: %v", c.from, c.to, c.seen, err)
		}
		if !c.ok && !errors.Is(err, ErrStepBack) {
			t.Errorf("%q -> %q (seen %v): err %v, want ErrStepBack", c.from, c.to, c.seen, err)
		}
	}
	// A view that clears JobSeen does not make the reboot releasable.
	stored := Reboot{Step: StepJob, JobSeen: true}
	if err := CheckStepForward("p", 0, stored, Reboot{Step: StepReleased}); !errors.Is(err, ErrStepBack) {
		t.Errorf("job seen, view clears JobSeen and releases: err %v, want ErrStepBack", err)
	}
}
