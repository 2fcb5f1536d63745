package remediationtest_test

import (
	"context"
	"fmt"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// ExampleNewStores shows the constructor a store's test gives to Contract:
// fresh stores holding exactly the machines and nodes given, and, as the
// fake Cluster can watch (remediation.MachineWatcher), Mark: how your
// health checker marks a machine, which the kit checks the watch reports;
// and OtherMachines and OtherAdmissions, second handles on the Machines and
// the admission record as another process has them (for your store: a
// second client or Open of the same storage), through which the kit races
// half its SaveStates and admissions. In your test: remediationtest.Contract(t, newStores).
func ExampleNewStores() {
	var newStores remediationtest.NewStores = func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := fake.NewCluster()
		for _, m := range ms {
			c.AddMachine(m)
		}
		for _, n := range ns {
			c.PutNode(n)
		}
		mark := func(_ context.Context, m string, on bool) error { c.SetNeedsRemediation(m, on); return nil }
		return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), OtherMachines: c.OtherMachines(), Admissions: c, OtherAdmissions: c.OtherAdmissions(), Mark: mark}, nil
	}
	s, _ := newStores([]remediation.Machine{{Name: "s1", NodeName: "s1"}}, []remediation.Node{{Exists: true, Name: "s1"}})
	n, _ := s.Nodes.Get(context.Background(), "s1")
	fmt.Println(n.Name, n.Exists)
	// Output: s1 true
}
