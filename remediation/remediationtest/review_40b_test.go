package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// deafRecords is a RecordStore that says it can watch (a RecordWatcher)
// but whose Watch never reports a change.
type deafRecords struct{ *records }

func (deafRecords) Watch(ctx context.Context, _ string) (<-chan struct{}, error) {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// TestReview40b_ContractPassesDeafRecordWatcher: since round 1,
// Reconciler.Loop wakes a Machine on its store's Watch and polls only a
// store that cannot watch (Records over a RecordWatcher is a
// MachineWatcher). The kit checks reboot.HostWatcher's contract
// (reboottest: Watch returns, reports, re-arms) but nothing of
// MachineWatcher or RecordWatcher: a RecordStore whose Watch never fires
// passes remediationtest.Contract, and under the Runner its records
// marked unhealthy are never polled, so they are remediated only at the
// next Resync (10 min by default) or never if their key is not listed.
func TestReview40b_ContractPassesDeafRecordWatcher(t *testing.T) {
	t.Parallel()
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		machines, nodes := remediation.Records(deafRecords{seededRecords(ms, ns)})
		if _, ok := machines.(remediation.MachineWatcher); !ok {
			t.Error("Records over a RecordWatcher should be a MachineWatcher")
		}
		return remediationtest.Stores{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), SingleRecord: true}, nil
	}, "a RecordStore whose Watch never reports a change (Reconciler.Loop then never polls it) passed the kit's Contract")
}
