package remediationtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// straylessCluster is a MachineStore whose SaveState persists every field
// of State but StraySeen (its schema maps State to columns written before
// round 18 added the field).
type straylessCluster struct{ *fake.Cluster }

func (c straylessCluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	s.StraySeen = time.Time{}
	return c.Cluster.SaveState(ctx, name, version, s)
}

// TestReview40_ContractPassesStoreThatLosesStraySeen: rounds 18 and 19
// made a finished remediation count its own host while a stray request of
// the Machine's found there may hold it off, on State.StraySeen
// ("persisted before that request is removed": the pass removes the
// request, so the next pass knows of it only from StraySeen). The kit's
// Contract checks that "a saved State comes back with every field", but
// its fullState (remediationtest.go fullState) sets every field except
// StraySeen, so a store that drops it passes Contract; behind it the
// sighting is lost with the pass that removes the request, the admission
// is released (or never re-taken) while the host is off for that request,
// and the storm guard admits past MaxCount.
func TestReview40_ContractPassesStoreThatLosesStraySeen(t *testing.T) {
	t.Parallel()
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: straylessCluster{c}, Nodes: c.Nodes(), Admissions: c, Mark: markOn(c)}, nil
	}, "a MachineStore whose SaveState loses State.StraySeen (the only record of a stray request found and removed on the Machine's own host) passed Contract: the kit's fullState has no StraySeen")
}
