package remediationtest

import (
	"context"
	"slices"
	"testing"

	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/remediation"
)

// The Reconciler makes each of its writes through reboot.Fenced, whose
// only fence is the context the Guard returns: a leader paused between its
// Hold and its write resumes with that context ended, and only the store
// can refuse. The checks below give each kind of write an ended context
// (endedctx.From: cancelled, and ended by the clock only, as
// reboot.ClockBound reports after a pause) and read the store back: the
// write must fail and change nothing (endedmore.go checks the
// Reconciler's other writes the same way).

// checkEndedSaveState checks that SaveState of machine name with its
// current version, through machines and through other (if not nil), fails
// with an ended context and leaves the Machine's State and version as
// they were.
func checkEndedSaveState(ctx context.Context, t testing.TB, machines, other remediation.MachineStore, name string) {
	t.Helper()
	handles := []struct {
		name string
		s    remediation.MachineStore
	}{{"Machines", machines}, {"OtherMachines", other}}
	for _, h := range handles {
		if h.s == nil {
			continue
		}
		for _, e := range endedctx.From(ctx) {
			before, err := machines.Get(ctx, name)
			if err != nil {
				t.Errorf("Machines.Get %s: %v", name, err)
				return
			}
			late := remediation.State{Phase: remediation.PhaseFailed, Attempt: before.State.Attempt + 9, Message: "written after the lease ran out"}
			if err := h.s.SaveState(e.Ctx, name, before.Version, late); err == nil {
				t.Errorf("%s.SaveState of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a reboot.Guard's write after its lease ran out, from a paused leader, would land)", h.name, name, e.Name)
			}
			if after, err := machines.Get(ctx, name); err != nil || after.Version != before.Version || !after.State.Equal(before.State) {
				t.Errorf("after %s.SaveState of %s with %s: version %q (was %q), state %+v (%v): the write landed", h.name, name, e.Name, after.Version, before.Version, after.State, err)
			}
		}
	}
}

// checkEndedAdmissions checks that PutAdmissions with the current
// version, through adm and through other (if not nil), fails with an
// ended context and leaves the record (version, admitted Machines) as it
// was.
func checkEndedAdmissions(ctx context.Context, t testing.TB, adm, other remediation.AdmissionStore) {
	t.Helper()
	handles := []struct {
		name string
		s    remediation.AdmissionStore
	}{{"Admissions", adm}, {"OtherAdmissions", other}}
	for _, h := range handles {
		if h.s == nil {
			continue
		}
		for _, e := range endedctx.From(ctx) {
			before, err := adm.GetAdmissions(ctx)
			if err != nil {
				t.Errorf("GetAdmissions: %v", err)
				return
			}
			late := before
			late.Machines = append(slices.Clone(before.Machines), "late")
			if err := h.s.PutAdmissions(e.Ctx, late); err == nil {
				t.Errorf("%s.PutAdmissions with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader's admission, past its lease, would land beside a new leader's: more hosts remediated at once than allowed)", h.name, e.Name)
			}
			if after, err := adm.GetAdmissions(ctx); err != nil || after.Version != before.Version || after.Has("late") {
				t.Errorf("after %s.PutAdmissions with %s: version %q (was %q), machines %v (%v): the write landed", h.name, e.Name, after.Version, before.Version, after.Machines, err)
			}
		}
	}
}

// checkEndedNodeDelete checks that Nodes.Delete of node name with its
// UID fails with an ended context and leaves the Node in place.
func checkEndedNodeDelete(ctx context.Context, t testing.TB, nodes remediation.NodeStore, name, uid string) {
	t.Helper()
	for _, e := range endedctx.From(ctx) {
		if err := nodes.Delete(e.Ctx, name, uid); err == nil {
			t.Errorf("Nodes.Delete of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a paused leader would delete the Node of a host a new leader may have powered on)", name, e.Name)
		}
		if n, err := nodes.Get(ctx, name); err != nil || !n.Exists {
			t.Errorf("after Nodes.Delete of %s with %s: exists %v (%v): the Node was deleted", name, e.Name, n.Exists, err)
			return
		}
	}
}

// checkEndedRecordUpdate checks that a RecordStore's Update of record
// name with its current version fails with an ended context and leaves
// the record as it was (remediation.Records writes every change through
// it).
func checkEndedRecordUpdate(ctx context.Context, t testing.TB, rs remediation.RecordStore, name string) {
	t.Helper()
	for _, e := range endedctx.From(ctx) {
		before, err := rs.Get(ctx, name)
		if err != nil {
			t.Errorf("RecordStore.Get %s: %v", name, err)
			return
		}
		late := before
		late.OutOfService = !before.OutOfService
		if _, err := rs.Update(e.Ctx, late); err == nil {
			t.Errorf("RecordStore.Update of %s with %s succeeded: a store must check its context (ctx.Err()) just before it writes (a reboot.Guard's write after its lease ran out, from a paused leader, would land)", name, e.Name)
		}
		if after, err := rs.Get(ctx, name); err != nil || after.Version != before.Version || after.OutOfService != before.OutOfService {
			t.Errorf("after RecordStore.Update of %s with %s: version %q (was %q), out of service %v (%v): the write landed", name, e.Name, after.Version, before.Version, after.OutOfService, err)
		}
	}
}
