package remediationtest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// hostlessCluster is a MachineStore whose SaveState persists every field
// of State but Host (its schema was written before the field existed, or
// maps State to columns of its own): the host a request was written to is
// lost at every write.
type hostlessCluster struct{ *fake.Cluster }

func (c hostlessCluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	s.Host = ""
	return c.Cluster.SaveState(ctx, name, version, s)
}

// TestReview40h_ContractPassesStoreThatLosesStateHost: round 7 made
// "never two hosts held at once" and "the request is read and removed
// there, whatever the Machine maps to later" (doc.go) rest on State.Host
// being persisted; the kit's doc says Contract checks what the Reconciler
// relies on. Contract's SaveState check (remediationtest.go:106) saves a
// State of Phase, Attempt and Started only and compares with Equal, so a
// store that drops State.Host (or RequestedAt, Canceled, Backup, Tainted,
// Message...) passes; StateMachine's World maps every machine to one host
// for ever (world.go HostOf), so it never sees a move either. Behind such
// a store the Reconciler silently falls back to HostOf for every removal:
// round 7's TestReview40g_MachineMovedMidRemediationLeavesOldHostOff comes
// back. The kit should save and compare a State with every field set.
func TestReview40h_ContractPassesStoreThatLosesStateHost(t *testing.T) {
	t.Parallel()
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: hostlessCluster{c}, Nodes: c.Nodes(), Admissions: c, Mark: markOn(c)}, nil
	}, "a MachineStore whose SaveState loses State.Host (the host a reboot request was written to) passed Contract: the kit saves a State without Host and never reads it back")
}

// undeletableCluster is a MachineStore whose Delete reports success and
// deletes nothing (a soft delete its Get does not filter, a finalizer
// nobody removes).
type undeletableCluster struct{ *fake.Cluster }

func (undeletableCluster) Delete(context.Context, string) error { return nil }

// TestReview40h_ContractPassesMachineStoreThatNeverDeletes: the package
// doc says Contract checks "ErrNotFound ... and the metadata rules the
// Reconciler relies on"; the Reconciler relies on MachineStore.Delete
// twice: escalation deletes a Machine "for its owner to replace", and a
// deleted Machine's pass (Get: ErrNotFound) is what releases its host and
// admission. Contract never calls Machines.Delete (remediationtest.go
// checks Nodes.Delete only) and StateMachine's end check does not look
// for deleted Machines, so a store whose Delete deletes nothing passes.
func TestReview40h_ContractPassesMachineStoreThatNeverDeletes(t *testing.T) {
	t.Parallel()
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: undeletableCluster{c}, Nodes: c.Nodes(), Admissions: c, Mark: markOn(c)}, nil
	}, "a MachineStore whose Delete deletes nothing passed Contract: the kit never checks Machines.Delete (escalation's replacement, and the deleted Machine's release, rest on it)")
}
