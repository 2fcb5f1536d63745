package remediationtest_test

import (
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestReview40g_ContractWithoutWorldPassesWatchBlindToHealthChecker:
// 91cc111 made the kit's MachineWatcher check also write the health
// checker's mark, but only "when the kit has a World" (checkWatchers,
// remediationtest.go:189); the package doc says Contract does not need
// one, and the package's own ExampleNewStores builds Stores without it.
// A user who follows that example gets a Contract that checks the watch
// with SaveState writes only: a Watch fired by the store's own SaveState,
// blind to the health checker marking a Machine (the one change that
// starts a remediation; Loop never polls a store that can watch), passes.
// The kit should fail (or refuse to pass) a MachineWatcher it cannot
// check for the mark: ask for World, or for a mark hook, in that case.
func TestReview40g_ContractWithoutWorldPassesWatchBlindToHealthChecker(t *testing.T) {
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := &ownWritesCluster{Cluster: seedCluster(fake.NewCluster(), ms, ns), subs: map[string][]chan struct{}{}}
		// As ExampleNewStores: no World (Contract "does not" need it).
		return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), Admissions: c}, nil
	}, "a MachineWatcher whose Watch reports only its own SaveState writes, never the health checker's mark, passed Contract run as ExampleNewStores shows (without World): the mark is checked only when World is set")
}
