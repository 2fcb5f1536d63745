package inventory

import (
	"flag"
	"testing"
)

// setFlag sets a rapid flag for one test and restores it after.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// TestReview38_MayBeOffFollowUpPowerOffDuringNextReboot replays, as a
// deterministic test, the case of seed 6726181543479731612 of
// TestJobStateMachineTwoExecutors: after a job ends saying its server "may
// be off", the fleet's follow-up reconciler still sends a hard power-off
// while the plan has started another reboot in that slot. Ground truth (the
// emulated BMCs' power log): 2 servers off at once at concurrency 1.
//
// The failing case is drawn from the fixed seed (no shrinking, no failure file
// written), so this test fails on every run until the bug
// is fixed.
func TestReview38_MayBeOffFollowUpPowerOffDuringNextReboot(t *testing.T) {
	setFlag(t, "rapid.seed", "6726181543479731612")
	setFlag(t, "rapid.nofailfile", "true")
	setFlag(t, "rapid.shrinktime", "1ms")
	jobStateMachine(t, true)
}
