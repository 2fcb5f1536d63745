package fake

import (
	"context"

	"github.com/rebootkit/rebootkit/remediation"
)

// OtherMachines returns a second handle on the cluster's Machines, as
// another process (a second reconciler) has it: a
// remediation.MachineStore of its own that reads and writes the same
// Machines, SaveState's compare-and-swap checked and written under the
// cluster's lock, as processes share records whose compare-and-swap the
// storage makes atomic. The cluster's interloper (SetInterloper) is not
// called for its writes.
func (c *Cluster) OtherMachines() remediation.MachineStore { return &otherMachines{c: c} }

// otherMachines is OtherMachines' handle.
type otherMachines struct{ c *Cluster }

// Get implements remediation.MachineStore.
func (o *otherMachines) Get(ctx context.Context, name string) (remediation.MachineRecord, error) {
	return o.c.Get(ctx, name)
}

// List implements remediation.MachineStore.
func (o *otherMachines) List(ctx context.Context) ([]remediation.MachineRecord, error) {
	return o.c.List(ctx)
}

// SaveState implements remediation.MachineStore with compare-and-swap.
func (o *otherMachines) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	return o.c.saveState(ctx, name, version, s)
}

// RemoveNeedsRemediation implements remediation.MachineStore.
func (o *otherMachines) RemoveNeedsRemediation(ctx context.Context, name string) error {
	return o.c.RemoveNeedsRemediation(ctx, name)
}

// Delete implements remediation.MachineStore.
func (o *otherMachines) Delete(ctx context.Context, name string) error {
	return o.c.Delete(ctx, name)
}
