package reboottest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestStateMachineCatchesLastWriterWins: the state machines fail a store
// that ignores versions (lastWriterWins), also with the restarts kept
// inside assumption A3 (review 40aa,
// TestReview40aa_KitFailsProjectsOwnFakeStore). Rapid fails the test it
// runs in, so the kit runs in a child process of this test binary, with a
// fixed seed, and the child must fail with rapid's report.
func TestStateMachineCatchesLastWriterWins(t *testing.T) {
	if which := os.Getenv("REBOOTTEST_BROKEN_CHILD"); which != "" {
		newStores := func(h reboot.Host) (reboottest.Stores, error) {
			return reboottest.Stores{Hosts: lastWriterWins{fake.NewRebootHosts(h)}}, nil
		}
		switch which {
		case "StateMachine":
			reboottest.StateMachine(t, newStores)
		case "StateMachineStuck":
			reboottest.StateMachineStuck(t, newStores)
		}
		return
	}
	t.Parallel()
	for _, which := range []string{"StateMachine", "StateMachineStuck"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStateMachineCatchesLastWriterWins$", "-test.timeout=5m",
			"-rapid.seed=1", "-rapid.checks=200", "-rapid.nofailfile")
		cmd.Env = append(os.Environ(), "REBOOTTEST_BROKEN_CHILD="+which)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s passed a store that ignores versions:\n%s", which, out)
			continue
		}
		if !strings.Contains(string(out), "[rapid] failed") {
			t.Errorf("%s: the child failed without rapid's report (%v):\n%s", which, err, out)
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "[rapid] failed") {
				t.Logf("%s caught it: %s", which, strings.TrimSpace(l))
			}
		}
	}
}
