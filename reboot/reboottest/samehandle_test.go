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

// TestContractFailsSameHandleTwice: Stores.Other must be a second
// handle, never Hosts given again (round 29's Low): through one handle
// the race cannot catch a store atomic only within one process. Contract
// fails the test it runs in, so it runs in a child process of this test
// binary, which must fail naming the handle given again.
func TestContractFailsSameHandleTwice(t *testing.T) {
	if os.Getenv("REBOOTTEST_SAME_HANDLE_CHILD") != "" {
		reboottest.Contract(t, func(h reboot.Host) (reboottest.Stores, error) {
			s := fake.NewRebootHosts(h)
			return reboottest.Stores{Hosts: s, Other: s}, nil
		})
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestContractFailsSameHandleTwice$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "REBOOTTEST_SAME_HANDLE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("Contract passed Stores{Hosts: s, Other: s}:\n%s", out)
	}
	if !strings.Contains(string(out), "Stores.Other is Stores.Hosts given again") {
		t.Fatalf("the child failed without naming the handle given again (%v):\n%s", err, out)
	}
}
