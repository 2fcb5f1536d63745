package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// partlyBlindMachines refuses an ended context at SaveState (the
// cluster's own check) but writes RemoveNeedsRemediation and Delete with
// any context: a store that checks ctx.Err() only at some of its writes.
type partlyBlindMachines struct{ *fake.Cluster }

func (c partlyBlindMachines) RemoveNeedsRemediation(_ context.Context, name string) error {
	return c.Cluster.RemoveNeedsRemediation(context.Background(), name)
}

func (c partlyBlindMachines) Delete(_ context.Context, name string) error {
	return c.Cluster.Delete(context.Background(), name)
}

// partlyBlindNodes refuses an ended context at Delete but taints,
// untaints and restores metadata with any context.
type partlyBlindNodes struct{ *fake.ClusterNodes }

func (n partlyBlindNodes) SetOutOfService(_ context.Context, name string, on bool) error {
	return n.ClusterNodes.SetOutOfService(context.Background(), name, on)
}

func (n partlyBlindNodes) AddMetadata(_ context.Context, name string, labels, annotations map[string]string) error {
	return n.ClusterNodes.AddMetadata(context.Background(), name, labels, annotations)
}

// TestReview40aj_ContractPassesStoreBlindAtTaintAndDelete: MachineStore's
// doc (remediation/reconciler.go) says every store of the package "writes
// nothing once a write's ctx has ended" and that remediationtest.Contract
// checks it; the Reconciler makes Nodes.SetOutOfService(true) ("taint
// node"), AddMetadata, RemoveNeedsRemediation and Machines.Delete
// ("delete machine", escalation) through reboot.Fenced too
// (reconciler.go:419-439), fenced only by the Guard's context. Round 31's
// ended-context checks (ended.go) give an ended context to SaveState,
// PutAdmissions, Nodes.Delete and RecordStore.Update only, so a store that
// checks ctx at those and not at its taint or its Machine deletion passes
// the kit: a paused leader's late "taint node" lands the out-of-service
// taint (pods force-deleted, volumes detached) on the Node of a host the
// new leader has powered on, and its late escalation deletes a Machine.
// Ground truth first: with a cancelled context the store's taint and
// deletion land (read back from the cluster).
func TestReview40aj_ContractPassesStoreBlindAtTaintAndDelete(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m0", NodeName: "n0"})
	c.PutNode(remediation.Node{Name: "n0", UID: "u0", Exists: true, Ready: true})
	ended, cancel := context.WithCancel(bg)
	cancel()
	if err := (partlyBlindNodes{c.Nodes()}).SetOutOfService(ended, "n0", true); err != nil || !c.Node("n0").OutOfService {
		t.Fatalf("ground truth: the blind taint did not land (%v)", err)
	}
	if err := (partlyBlindMachines{c}).Delete(ended, "m0"); err != nil {
		t.Fatalf("ground truth: the blind Delete failed: %v", err)
	}
	if _, err := c.Get(bg, "m0"); err == nil {
		t.Fatal("ground truth: the blind Delete left the Machine")
	}

	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: partlyBlindMachines{c}, OtherMachines: c.OtherMachines(), Nodes: partlyBlindNodes{c.Nodes()},
			Admissions: c, OtherAdmissions: c.OtherAdmissions(), Mark: markOn(c)}, nil
	}, "Contract passed stores whose Nodes.SetOutOfService, AddMetadata, RemoveNeedsRemediation and Machines.Delete write with an ended context (a paused leader's late taint or escalation lands; MachineStore's doc says every write refuses and that the kit checks it)")
}
