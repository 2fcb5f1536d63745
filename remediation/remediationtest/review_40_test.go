package remediationtest_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// lwwRecords is a RecordStore whose Update ignores the version it is
// given (last writer wins): the bug the kit exists to catch.
type lwwRecords struct{ *records }

func (s lwwRecords) Update(_ context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[r.Name] = r
	return r, nil
}

// TestReview40_ContractPassesRecordStoreWithoutCAS: a RecordStore whose
// Update does not compare versions passes remediationtest.Contract through
// remediation.Records, because the adapter's SaveState compares the
// version itself (Get, compare, Update: not atomic) and the kit only
// writes sequentially. Such a store loses writes for real: Records'
// SetOutOfService, AddMetadata and RemoveNeedsRemediation are
// read-change-write loops that count on ErrConflict, so one that read the
// record before a concurrent SaveState (another leader's, or the health
// checker's Unhealthy flag) writes the old State back. The kit must fail
// it (e.g. by checking RecordStore.Update's compare-and-swap directly).
func TestReview40_ContractPassesRecordStoreWithoutCAS(t *testing.T) {
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		machines, nodes := remediation.Records(lwwRecords{seededRecords(ms, ns)})
		return remediationtest.Stores{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), SingleRecord: true}, nil
	}, "a RecordStore whose Update ignores versions (last writer wins) passed the kit's Contract")
}
