package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// prevHostlessCluster is a MachineStore whose SaveState persists every
// field of State but PrevHost (a schema of its own written before round 9
// added the field).
type prevHostlessCluster struct{ *fake.Cluster }

func (c prevHostlessCluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	s.PrevHost = ""
	return c.Cluster.SaveState(ctx, name, version, s)
}

// TestReview40j_ContractPassesStoreThatLosesPrevHost: round 9 made the
// removal of a paused writer's stray request on the host a Machine moved
// from rest on State.PrevHost being persisted (doc.go Concurrency), and
// round 8 made the kit save "a State with every field set, as the
// Reconciler persists them: a store must give each back"
// (remediationtest.go fullState). fullState sets every field but
// PrevHost, so a store that drops it passes Contract, and behind it the
// stray request is never removed.
func TestReview40j_ContractPassesStoreThatLosesPrevHost(t *testing.T) {
	t.Parallel()
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: prevHostlessCluster{c}, Nodes: c.Nodes(), Admissions: c, Mark: markOn(c)}, nil
	}, "a MachineStore whose SaveState loses State.PrevHost passed Contract: fullState (\"every field set\") has no PrevHost")
}
