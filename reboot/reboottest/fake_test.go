package reboottest_test

import (
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestFakeStore runs the kit on the project's fake store (issue 40,
// point 4).
func TestFakeStore(t *testing.T) {
	t.Parallel()
	reboottest.Check(t, func(h reboot.Host) (reboottest.Stores, error) {
		s := fake.NewRebootHosts(h)
		return reboottest.Stores{Hosts: s, Other: s.Other()}, nil
	})
}
