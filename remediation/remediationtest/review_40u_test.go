package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// oneEarlierCluster is a MachineStore and AdmissionStore that persists
// only the first entry of State.EarlierHosts and of
// Member.EarlierHosts (a schema with one "earlier host" column).
type oneEarlierCluster struct{ *fake.Cluster }

func (c oneEarlierCluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	if len(s.EarlierHosts) > 1 {
		s.EarlierHosts = s.EarlierHosts[:1]
	}
	return c.Cluster.SaveState(ctx, name, version, s)
}

func (c oneEarlierCluster) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	if len(a.Members) > 0 {
		m := make(map[string]remediation.Member, len(a.Members))
		for k, v := range a.Members {
			if len(v.EarlierHosts) > 1 {
				v.EarlierHosts = v.EarlierHosts[:1]
			}
			m[k] = v
		}
		a.Members = m
	}
	return c.Cluster.PutAdmissions(ctx, a)
}

// TestReview40_ContractPassesStoreThatKeepsOneEarlierHost: round 20's
// fullState checks by reflection that every field of State is set, but
// EarlierHosts, the list of hosts a Machine moved from before PrevHost
// (each read for a stray request of the Machine's, and counted while off
// for one), is written with one entry, in State and in the admission's
// Member. A store that keeps only the first passes Contract; behind it a
// Machine moved three times forgets every earlier host but one, and a
// stray request of its landing on a forgotten one is never read nor
// removed (the host held off for it for good, never counted). The
// StateMachine, one host per Machine, never moves one.
func TestReview40_ContractPassesStoreThatKeepsOneEarlierHost(t *testing.T) {
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		s := oneEarlierCluster{c}
		return remediationtest.Stores{Machines: s, Nodes: c.Nodes(), Admissions: s, Mark: markOn(c)}, nil
	}, "a store that persists only the first of State.EarlierHosts and Member.EarlierHosts passed Contract: the kit writes one earlier host")
}
