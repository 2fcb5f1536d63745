package remediationtest

import (
	"context"
	"errors"
	"testing"

	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/remediation"
)

// The rest of the Reconciler's writes through reboot.Fenced, checked as
// ended.go checks SaveState: each is given an ended context and the store
// read back through a live one.

// machineHandles are the MachineStore handles a check writes through:
// Machines, and OtherMachines if given.
func machineHandles(machines, other remediation.MachineStore) []struct {
	name string
	s    remediation.MachineStore
} {
	hs := []struct {
		name string
		s    remediation.MachineStore
	}{{"Machines", machines}}
	if other != nil {
		hs = append(hs, struct {
			name string
			s    remediation.MachineStore
		}{"OtherMachines", other})
	}
	return hs
}

// checkEndedRemoveNeedsRemediation checks that RemoveNeedsRemediation of
// machine name (marked), through machines and other (if not nil), fails
// with an ended context and leaves the mark and the version as they were.
func checkEndedRemoveNeedsRemediation(ctx context.Context, t testing.TB, machines, other remediation.MachineStore, name string) {
	t.Helper()
	for _, h := range machineHandles(machines, other) {
		for _, e := range endedctx.From(ctx) {
			before, err := machines.Get(ctx, name)
			if err != nil {
				t.Errorf("Machines.Get %s: %v", name, err)
				return
			}
			if err := h.s.RemoveNeedsRemediation(e.Ctx, name); err == nil {
				t.Errorf("%s.RemoveNeedsRemediation of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader's late write would clear the health checker's mark)", h.name, name, e.Name)
			}
			if after, err := machines.Get(ctx, name); err != nil || after.Version != before.Version || after.Machine.NeedsRemediation != before.Machine.NeedsRemediation {
				t.Errorf("after %s.RemoveNeedsRemediation of %s with %s: version %q (was %q), needs remediation %v (was %v) (%v): the write landed", h.name, name, e.Name, after.Version, before.Version, after.Machine.NeedsRemediation, before.Machine.NeedsRemediation, err)
			}
		}
	}
}

// checkEndedMachineDelete checks that Machines.Delete of machine name,
// through machines and other (if not nil), fails with an ended context
// and leaves the Machine in place.
func checkEndedMachineDelete(ctx context.Context, t testing.TB, machines, other remediation.MachineStore, name string) {
	t.Helper()
	for _, h := range machineHandles(machines, other) {
		for _, e := range endedctx.From(ctx) {
			if err := h.s.Delete(e.Ctx, name); err == nil {
				t.Errorf("%s.Delete of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader's late escalation would delete a Machine)", h.name, name, e.Name)
			}
			if _, err := machines.Get(ctx, name); err != nil {
				if errors.Is(err, remediation.ErrNotFound) {
					t.Errorf("after %s.Delete of %s with %s: the Machine was deleted", h.name, name, e.Name)
				} else {
					t.Errorf("Machines.Get %s after %s.Delete with %s: %v", name, h.name, e.Name, err)
				}
				return
			}
		}
	}
}

// checkEndedSetOutOfService checks that SetOutOfService(on) of node name
// (whose taint is !on) fails with an ended context and leaves the taint
// as it was.
func checkEndedSetOutOfService(ctx context.Context, t testing.TB, nodes remediation.NodeStore, name string, on bool) {
	t.Helper()
	for _, e := range endedctx.From(ctx) {
		if err := nodes.SetOutOfService(e.Ctx, name, on); err == nil {
			t.Errorf("Nodes.SetOutOfService(%v) of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader's late taint would force-delete the pods of a host a new leader has powered on)", on, name, e.Name)
		}
		if n, err := nodes.Get(ctx, name); err != nil || n.OutOfService == on {
			t.Errorf("after Nodes.SetOutOfService(%v) of %s with %s: out of service %v (%v): the write landed", on, name, e.Name, n.OutOfService, err)
			return
		}
	}
}

// checkEndedAddMetadata checks that AddMetadata of a label and an
// annotation node name lacks fails with an ended context and adds
// neither.
func checkEndedAddMetadata(ctx context.Context, t testing.TB, nodes remediation.NodeStore, name string) {
	t.Helper()
	const key = "rebootkit-test-late"
	for _, e := range endedctx.From(ctx) {
		if err := nodes.AddMetadata(e.Ctx, name, map[string]string{key: "x"}, map[string]string{key: "x"}); err == nil {
			t.Errorf("Nodes.AddMetadata of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader's late write would land)", name, e.Name)
		}
		if n, err := nodes.Get(ctx, name); err != nil {
			t.Errorf("Nodes.Get %s: %v", name, err)
			return
		} else if _, ok := n.Labels[key]; ok {
			t.Errorf("after Nodes.AddMetadata of %s with %s: label %s added: the write landed", name, e.Name, key)
		} else if _, ok := n.Annotations[key]; ok {
			t.Errorf("after Nodes.AddMetadata of %s with %s: annotation %s added: the write landed", name, e.Name, key)
		}
	}
}
