package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestReview40ai_ContractPassesStoresIgnoringContext: remediation's
// Reconciler makes every store write (PutAdmissions, SaveState,
// Nodes.Delete ...) through reboot.Fenced, whose only fence is the
// context the Guard returns ("The caller makes its one write or power
// call with that context"): a leader paused between its Hold and its write
// resumes with that context ended, and only the store can refuse. Round
// 40ab made reboottest.Contract require this of a HostStore; the
// remediation kit's Contract never gives a write an ended context, so it
// passes stores that write anyway: the project's own fake.Cluster (every
// write takes `_ context.Context`) is one. Ground truth first: fake.Cluster
// saves a State, an admission and deletes a Node with a cancelled context.
func TestReview40ai_ContractPassesStoresIgnoringContext(t *testing.T) {
	t.Parallel()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m0", NodeName: "n0"})
	c.PutNode(remediation.Node{Name: "n0", UID: "u0", Exists: true, Ready: true})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	rec, err := c.Get(context.Background(), "m0")
	if err != nil {
		t.Fatal(err)
	}
	st := rec.State
	st.Attempt = 7
	wrote := 0
	if c.SaveState(ended, "m0", rec.Version, st) == nil {
		wrote++
	}
	adm, _ := c.GetAdmissions(context.Background())
	adm.Machines = append(adm.Machines, "m0")
	if c.PutAdmissions(ended, adm) == nil {
		wrote++
	}
	if c.Nodes().Delete(ended, "n0", "u0") == nil {
		wrote++
	}
	t.Logf("fake.Cluster: %d of 3 writes with an ended context succeeded", wrote)

	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		// fake.Cluster now refuses such writes (checked above, and by
		// fake's TestClusterRefusesEndedContext): its handles made blind
		// to the context stand for the stores that ignore it.
		b := blindCluster{c}
		return remediationtest.Stores{Machines: b, OtherMachines: blindMachines{c.OtherMachines()}, Nodes: blindNodes{c.Nodes()}, Admissions: b,
			OtherAdmissions: blindAdmissions{c.OtherAdmissions()}, Mark: markOn(c)}, nil
	}, "Contract passed stores whose SaveState, PutAdmissions and Nodes.Delete write with an ended context (a Guard's write after its lease ran out, from a paused leader, lands)")
}
