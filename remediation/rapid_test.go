package remediation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestPhasedStateMachine runs the phased remediator in a simulated cluster
// whose world is drawn from the adversary fakes: BMCs that report stale,
// flapping or unknown power states, power faults, a clock stepping at any
// precision, random node failures (fixed by a power cycle or not),
// cancellations, a health checker that re-adds its annotation at any moment
// (also right after success), a second reconciler that runs a whole pass
// between the first one's read and write, and crashes of the remediator
// between any two of its writes and restarts. After every step, against
// ground truth (the fake hardware and the cluster's contents):
//   - a Node is deleted or tainted only while its hardware is off;
//   - at most the limit of remediations are in flight, and at most one
//     control-plane machine, at any instant;
//   - no host is power-cycled more often than attempts were decided for it,
//     no remediation takes more than RetryLimit+1 attempts, and a new
//     remediation (attempt 1) starts only after MinHealthyPeriod of health;
//
// and at the end, once failures stop: every remediation finished or failed,
// every host is on, no reboot annotation is left, no Node carries our taint,
// and every Node that came back has its backed-up labels.
//
// The state machine is the conformance kit's (remediationtest.StateMachine),
// run here on the fake Cluster, so that third-party stores are tested with
// exactly this one.
func TestPhasedStateMachine(t *testing.T) {
	remediationtest.StateMachine(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := fake.NewCluster()
		for _, m := range ms {
			c.AddMachine(m)
		}
		for _, n := range ns {
			c.PutNode(n)
		}
		return remediationtest.Stores{Machines: c, OtherMachines: c.OtherMachines(), Nodes: c.Nodes(), Admissions: c, OtherAdmissions: c.OtherAdmissions(), World: clusterWorld{c}}, nil
	})
}

// clusterWorld plays the rest of the cluster on a fake Cluster.
type clusterWorld struct{ c *fake.Cluster }

func (w clusterWorld) SetNeedsRemediation(_ context.Context, m string, on bool) error {
	w.c.SetNeedsRemediation(m, on)
	return nil
}

func (w clusterWorld) PutNode(_ context.Context, n remediation.Node) error {
	w.c.PutNode(n)
	return nil
}

func (w clusterWorld) SetNodeReady(_ context.Context, n string, ready bool) error {
	w.c.SetNodeReady(n, ready)
	return nil
}

func describeSim(s *sim) string {
	out := ""
	recs, _ := s.cluster.List(s.ctx)
	for _, r := range recs {
		h := "h" + r.Machine.Name[1:]
		hh, _ := s.hosts.Get(s.ctx, h)
		out += fmt.Sprintf("\n%s: NR=%v phase=%s attempt=%d canceled=%v power=%v annotations=%v node=%+v broken=%v forever=%v",
			r.Machine.Name, r.Machine.NeedsRemediation, r.State.Phase, r.State.Attempt, r.State.Canceled,
			s.powers[h].Current(), hh.Annotations, s.cluster.Node("n"+r.Machine.Name[1:]), s.broken[r.Machine.Name], s.forever[r.Machine.Name])
	}
	return out
}
