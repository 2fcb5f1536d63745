// Package remediationtest is the conformance kit for the remediation
// stores you implement (MachineStore, NodeStore, AdmissionStore, or a
// RecordStore through remediation.Records): Contract checks, against what
// the store then returns, the compare-and-swap of State and of the
// admission record (with the request recorded per admitted Machine; and of
// racecheck.Writers reconcilers admitting at once from one read, beside
// readers, half of them through Stores.OtherAdmissions (a second
// process's handle on the record), in each of racecheck.Rounds to
// racecheck.MaxRounds rounds (racecheck.Enough): exactly one succeeds,
// the others wrap ErrConflict, and the record read back through
// OtherAdmissions admits the winner's Machine only; a store whose check is
// atomic only within one process fails, but only if OtherAdmissions is
// given: with it nil every writer goes through one handle), the
// compare-and-swap of SaveState raced the same way (racecheck.Writers
// reconcilers saving one Machine's State from one read, half of them
// through Stores.OtherMachines if given: exactly one succeeds, the others
// wrap ErrConflict, and the Machine read back through OtherMachines holds
// the winner's State under a new version), that a saved
// State comes back with every field, ErrNotFound, a Machine deleted by
// Machines.Delete (Get then wraps ErrNotFound, List omits it), a Node
// deleted only with the UID read, and the metadata rules the Reconciler
// relies on; behind remediation.Records, the RecordStore's own Update
// compare-and-swap, one call at a time and raced as SaveState is (through
// the RecordStore behind OtherMachines too, if that is Records'; Records'
// read-change-write loops count on its ErrConflict); that a write with
// an ended context fails and changes nothing (read back): every write
// the Reconciler makes to these stores through reboot.Fenced (its host
// writes go to a reboot.HostStore, which reboottest checks): SaveState,
// RemoveNeedsRemediation and Machines.Delete (each through OtherMachines
// too), PutAdmissions (through OtherAdmissions too), Nodes.SetOutOfService
// (tainting and untainting), Nodes.AddMetadata, Nodes.Delete with the UID
// read (Machines.Delete and Nodes.Delete not with Stores.SingleRecord),
// and behind remediation.Records the RecordStore's Update, each with a
// cancelled context and with one
// ended by the clock only (reboot.ClockBound past its deadline, as a
// Guard's is after a pause: Err non-nil, Done not yet closed), so a store
// must check ctx.Err() just before it writes (the Reconciler writes
// through reboot.Fenced, fenced only by the Guard's context: a leader
// paused between its Hold and its write resumes with that context ended,
// and only the store can refuse); and when the MachineStore is a remediation.MachineWatcher,
// or the RecordStore a remediation.RecordWatcher, its Watch: it returns
// within 10 s, and if it can watch (no error), 100 writes nobody reads
// from the watch do not block, the watch then holds a value, each of three
// later writes gives another once the value before was read, and its
// channel is closed when its context ends (Reconciler.Loop does not poll a
// store that can watch). The writes include the health checker's mark,
// which the kit writes with Stores.Mark or Stores.World (behind
// remediation.Records, through the RecordStore): a MachineWatcher given
// neither fails Contract.
//
// StateMachine runs the remediation state machine over the stores, with a
// second reconciler, crashes, lying BMCs and a health checker, checked
// against ground truth (remediation's TestPhasedStateMachine is this test
// on the fake Cluster); it needs Stores.World to play the cluster. A
// failing case is saved by rapid under testdata/rapid/<TestName>/ of your
// package and replayed on every later run.
package remediationtest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/internal/watchcheck"
	"github.com/rebootkit/rebootkit/remediation"
)

// Stores are the handles of one fresh set of stores under test.
type Stores struct {
	Machines remediation.MachineStore
	// OtherMachines is a second handle on the same Machines, as another
	// process (a second reconciler) has it: its own client, connection
	// or Open of the same storage, never Machines given again (the kit fails when it is the same pointer) (behind
	// remediation.Records: Records over a second handle on the
	// RecordStore). Its reads must be current: Contract's race of
	// SaveState reads the Machine back through it. The race sends half
	// its writers through each handle, so a MachineStore whose version
	// check is atomic with its write only within one process fails. nil:
	// the race runs through Machines alone and cannot catch such a
	// store (give nil only where the storage admits one handle per
	// process). StateMachine uses Machines only.
	OtherMachines remediation.MachineStore
	Nodes         remediation.NodeStore
	Admissions    remediation.AdmissionStore
	// OtherAdmissions is a second handle on the same admission record,
	// as another process (a second reconciler) has it: its own client,
	// connection or Open of the same storage, never Admissions given
	// again (the kit fails when it is the same pointer). Its reads must be current: Contract's race reads the record
	// back through it. The race sends half its writers through each
	// handle, so an AdmissionStore whose version check is atomic with
	// its write only within one process (a sync.Mutex around read,
	// check and write on shared storage) fails. nil: the race runs
	// through Admissions alone and cannot catch such a store (give nil
	// only where the storage admits one handle per process).
	// StateMachine uses Admissions only.
	OtherAdmissions remediation.AdmissionStore
	// SingleRecord: Machines and Nodes are one record per server
	// (remediation.Records): Nodes.Delete and Machines.Delete are not
	// checked (run the Reconciler with Config.OutOfService).
	SingleRecord bool
	// World, if set, plays the rest of the cluster on these stores for
	// StateMachine (which needs it). Contract uses its
	// SetNeedsRemediation as the health checker's mark when Mark is nil.
	World World
	// Mark, if set, writes the health checker's mark on a machine (on) or
	// removes it, as your health checker does (Contract checks that a
	// MachineWatcher reports it: it is the change that starts a
	// remediation, and Reconciler.Loop does not poll a store that can
	// watch). A MachineStore that is a remediation.MachineWatcher needs
	// Mark or World, unless it is remediation.Records' (the kit then
	// writes Record.Unhealthy through the RecordStore): without them
	// Contract fails.
	Mark func(ctx context.Context, machine string, on bool) error
	// Close, if set, is called when the check is done.
	Close func()
}

// NewStores returns fresh stores holding exactly the machines and nodes
// given (each machine's node has the machine's name; machines start
// without a persisted State) and an empty admission record. A backend
// that assigns UIDs itself (an API server) may give its own: the kit
// deletes a Node with the UID its Get returns.
type NewStores func(machines []remediation.Machine, nodes []remediation.Node) (Stores, error)

// Contract runs the contract checks (see the package doc).
func Contract(t testing.TB, newStores NewStores) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	machines := []remediation.Machine{
		{Name: "s1", UID: "s1", NodeName: "s1", Cluster: "c", NeedsRemediation: true},
		{Name: "s2", UID: "s2", NodeName: "s2", Cluster: "c"},
	}
	nodes := []remediation.Node{
		{Exists: true, Name: "s1", UID: "s1", Ready: true, Labels: map[string]string{"role": "db"}},
		{Exists: true, Name: "s2", UID: "s2", Ready: true},
	}
	s, err := newStores(machines, nodes)
	if err != nil {
		t.Fatalf("new stores: %v", err)
	}
	if s.Close != nil {
		defer s.Close()
	}
	if racecheck.Same(s.OtherMachines, s.Machines) {
		t.Errorf("remediationtest: Stores.OtherMachines is Stores.Machines given again: give a second handle on the same Machines (its own client, connection or open of the same storage), or nil where the storage admits one handle per process")
	}
	if racecheck.Same(s.OtherAdmissions, s.Admissions) {
		t.Errorf("remediationtest: Stores.OtherAdmissions is Stores.Admissions given again: give a second handle on the same admission record (its own client, connection or open of the same storage), or nil where the storage admits one handle per process")
	}

	// Machines.
	if _, err := s.Machines.Get(ctx, "nope"); !errors.Is(err, remediation.ErrNotFound) {
		t.Errorf("Machines.Get of a missing machine: %v, want an error wrapping remediation.ErrNotFound", err)
	}
	rec, err := s.Machines.Get(ctx, "s1")
	if err != nil {
		t.Fatalf("Machines.Get: %v", err)
	}
	if rec.Machine.Name != "s1" || !rec.Machine.NeedsRemediation || rec.Machine.NodeName != "s1" {
		t.Errorf("Machines.Get: %+v, want s1 as created (needs remediation, node s1)", rec.Machine)
	}
	all, err := s.Machines.List(ctx)
	if err != nil || len(all) != 2 {
		t.Errorf("Machines.List: %d machines, %v; want 2", len(all), err)
	}
	st := fullState(t)
	if err := s.Machines.SaveState(ctx, "s1", rec.Version, st); err != nil {
		t.Fatalf("SaveState with the current version: %v", err)
	}
	after, _ := s.Machines.Get(ctx, "s1")
	if !after.State.Equal(st) || after.Version == rec.Version {
		t.Errorf("after SaveState: state %+v version %q (was %q), want the state saved (every field: the Reconciler reads and removes a reboot request on State.Host, fences on RequestedAt, ...) and a new version",
			after.State, after.Version, rec.Version)
	}
	if err := s.Machines.SaveState(ctx, "s1", rec.Version, remediation.State{}); !errors.Is(err, remediation.ErrConflict) {
		t.Errorf("SaveState with a stale version: %v, want an error wrapping remediation.ErrConflict (two reconciles would both start)", err)
	}
	if cur, _ := s.Machines.Get(ctx, "s1"); !cur.State.Equal(st) {
		t.Errorf("a refused SaveState changed the state to %+v", cur.State)
	}
	checkEndedRemoveNeedsRemediation(ctx, t, s.Machines, s.OtherMachines, "s1")
	if err := s.Machines.RemoveNeedsRemediation(ctx, "s1"); err != nil {
		t.Errorf("RemoveNeedsRemediation: %v", err)
	}
	if cur, _ := s.Machines.Get(ctx, "s1"); cur.Machine.NeedsRemediation || !cur.State.Equal(st) {
		t.Errorf("after RemoveNeedsRemediation: %+v, state %+v; want it cleared and the state kept", cur.Machine, cur.State)
	}
	checkEndedSaveState(ctx, t, s.Machines, s.OtherMachines, "s1")
	raceSaveState(ctx, t, s.Machines, s.OtherMachines, "s1")

	// Nodes.
	if n, err := s.Nodes.Get(ctx, "nope"); err != nil || n.Exists {
		t.Errorf("Nodes.Get of a missing node: %+v, %v; want Exists false and no error", n, err)
	}
	n, err := s.Nodes.Get(ctx, "s1")
	if err != nil || !n.Exists || !n.Ready {
		t.Fatalf("Nodes.Get: %+v, %v; want s1, existing and ready", n, err)
	}
	checkEndedSetOutOfService(ctx, t, s.Nodes, "s1", true)
	if err := s.Nodes.SetOutOfService(ctx, "s1", true); err != nil {
		t.Errorf("SetOutOfService: %v", err)
	}
	if n, _ := s.Nodes.Get(ctx, "s1"); !n.OutOfService {
		t.Error("SetOutOfService(true) did not show")
	}
	checkEndedSetOutOfService(ctx, t, s.Nodes, "s1", false)
	if err := s.Nodes.SetOutOfService(ctx, "s1", false); err != nil {
		t.Errorf("SetOutOfService(false): %v", err)
	}
	if n, _ := s.Nodes.Get(ctx, "s1"); n.OutOfService {
		t.Error("SetOutOfService(false) did not show")
	}
	checkEndedAddMetadata(ctx, t, s.Nodes, "s1")
	if err := s.Nodes.AddMetadata(ctx, "s1", map[string]string{"role": "other", "zone": "a"}, map[string]string{"note": "x"}); err != nil {
		t.Errorf("AddMetadata: %v", err)
	}
	if n, _ := s.Nodes.Get(ctx, "s1"); n.Labels["role"] != "db" || n.Labels["zone"] != "a" || n.Annotations["note"] != "x" {
		t.Errorf("after AddMetadata: labels %v annotations %v; want what was missing added, what was there kept", n.Labels, n.Annotations)
	}
	if !s.SingleRecord {
		if err := s.Nodes.Delete(ctx, "s2", "another-registration"); !errors.Is(err, remediation.ErrConflict) {
			t.Errorf("Nodes.Delete with another UID: %v, want an error wrapping remediation.ErrConflict (a node registered again is another node)", err)
		}
		if n, _ := s.Nodes.Get(ctx, "s2"); !n.Exists {
			t.Error("a refused Nodes.Delete deleted the node")
		}
		// The UID as the store reads it: a backend that assigns UIDs itself
		// (an API server) cannot take the one the kit asked for.
		uid := "s2"
		if n2, err := s.Nodes.Get(ctx, "s2"); err == nil && n2.UID != "" {
			uid = n2.UID
		}
		checkEndedNodeDelete(ctx, t, s.Nodes, "s2", uid)
		if err := s.Nodes.Delete(ctx, "s2", uid); err != nil {
			t.Errorf("Nodes.Delete with its UID: %v", err)
		}
		if n, _ := s.Nodes.Get(ctx, "s2"); n.Exists {
			t.Error("Nodes.Delete did not delete")
		}
		if err := s.Nodes.Delete(ctx, "s2", ""); err != nil {
			t.Errorf("Nodes.Delete of a missing node: %v, want success", err)
		}
	}

	if rs, ok := remediation.RecordStoreOf(s.Machines); ok {
		checkRecordStore(ctx, t, rs)
		checkEndedRecordUpdate(ctx, t, rs, "s2")
		var other remediation.RecordStore
		if s.OtherMachines != nil {
			other, _ = remediation.RecordStoreOf(s.OtherMachines)
		}
		raceRecordUpdate(ctx, t, rs, other, "s1")
	}
	checkWatchers(ctx, t, s.Machines, markOf(s))

	// Admissions.
	a, err := s.Admissions.GetAdmissions(ctx)
	if err != nil {
		t.Fatalf("GetAdmissions: %v", err)
	}
	next := a
	next.Machines = append(slices.Clone(a.Machines), "s1")
	if err := s.Admissions.PutAdmissions(ctx, next); err != nil {
		t.Fatalf("PutAdmissions with the current version: %v", err)
	}
	stale := a
	stale.Machines = append(slices.Clone(a.Machines), "s2")
	if err := s.Admissions.PutAdmissions(ctx, stale); !errors.Is(err, remediation.ErrConflict) {
		t.Errorf("PutAdmissions with a stale version: %v, want an error wrapping remediation.ErrConflict (the storm guard's admission would not be atomic)", err)
	}
	got, _ := s.Admissions.GetAdmissions(ctx)
	if !got.Has("s1") || got.Has("s2") {
		t.Errorf("admissions %v, want s1 only", got.Machines)
	}
	// The request recorded with an admission outlives its Machine: a
	// Machine deleted mid-remediation has it removed from that host.
	want := remediation.Request{Value: remediation.RebootValue("s1", st.RequestedAt), At: st.RequestedAt, Host: "host-1"}
	withReq := got
	withReq.Requests = map[string]remediation.Request{"s1": want}
	wantMember := remediation.Member{Cluster: "c1", HealthCheck: "hc1", ControlPlane: true, Wrote: true, PrevHost: "host-0",
		PrevHostSince: st.RequestedAt, PrevHostSeen: st.RequestedAt.Add(time.Second),
		EarlierHosts: []remediation.MovedFrom{{Host: "host-9", Since: st.Started, Seen: st.Started.Add(time.Second)}, {Host: "host-8", Since: st.Started.Add(-time.Hour), Seen: st.Started.Add(-time.Minute)}}}
	withReq.Members = map[string]remediation.Member{"s1": wantMember}
	if err := s.Admissions.PutAdmissions(ctx, withReq); err != nil {
		t.Errorf("PutAdmissions with a request: %v", err)
	} else if got, err := s.Admissions.GetAdmissions(ctx); err != nil || !got.Has("s1") ||
		got.Requests["s1"].Value != want.Value || got.Requests["s1"].Host != want.Host || !got.Requests["s1"].At.Equal(want.At) {
		t.Errorf("admissions after a write of s1's request: %+v, %v; want s1 with request %+v (Admissions.Requests must be persisted: a Machine deleted mid-remediation has its request removed from the host recorded there)", got, err, want)
	} else if !got.Members["s1"].Equal(wantMember) {
		t.Errorf("admissions after a write of s1's member entry: %+v; want %+v (Admissions.Members must be persisted: a Machine deleted mid-remediation is counted by the storm guard where it was, and its admission released at once only if it wrote no request)", got.Members, wantMember)
	}

	checkEndedAdmissions(ctx, t, s.Admissions, s.OtherAdmissions)
	raceAdmissions(ctx, t, s.Admissions, s.OtherAdmissions)

	// Machines.Delete: escalation deletes a Machine for its owner to
	// replace, and a deleted Machine's pass (Get: ErrNotFound) is what
	// releases its host and its admission. (A single record is never
	// deleted: remediation.Records refuses, and its servers have no
	// owner that replaces them.)
	if s.SingleRecord {
		return
	}
	checkEndedMachineDelete(ctx, t, s.Machines, s.OtherMachines, "s1")
	if err := s.Machines.Delete(ctx, "s1"); err != nil {
		t.Errorf("Machines.Delete: %v", err)
	}
	if _, err := s.Machines.Get(ctx, "s1"); !errors.Is(err, remediation.ErrNotFound) {
		t.Errorf("Machines.Get after Machines.Delete: %v, want an error wrapping remediation.ErrNotFound (a Machine escalated for replacement would stay, and a deleted one would never be released)", err)
	}
	if all, err := s.Machines.List(ctx); err != nil || slices.ContainsFunc(all, func(r remediation.MachineRecord) bool { return r.Machine.Name == "s1" }) {
		t.Errorf("Machines.List after Machines.Delete of s1: %d machines, %v; want s1 gone", len(all), err)
	}
}

// fullState is a State with every field set, as the Reconciler persists
// them: a store must give each back. It fails t if a field of State (or
// of its MovedFrom and NodeBackup) is left zero, so that a field added
// to State is added here too.
func fullState(t testing.TB) remediation.State {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := remediation.State{Phase: remediation.PhasePoweringOn, Attempt: 2, Started: t0, RequestedAt: t0.Add(time.Second), Host: "host-1", PrevHost: "host-0",
		PrevHostSince: t0.Add(time.Second), PrevHostSeen: t0.Add(3 * time.Second), EarlierHosts: []remediation.MovedFrom{{Host: "host-9", Since: t0, Seen: t0.Add(4 * time.Second)}, {Host: "host-8", Since: t0.Add(-time.Hour), Seen: t0.Add(-time.Minute)}},
		StraySeen: t0.Add(5 * time.Second), Finished: t0.Add(-time.Hour), UnhealthyAgain: t0.Add(-time.Minute), Canceled: true, CanceledAt: t0.Add(2 * time.Second),
		Backup:  &remediation.NodeBackup{Name: "s1", Labels: map[string]string{"role": "db"}, Annotations: map[string]string{"note": "x"}},
		Tainted: true, Message: "waiting for the reboot controller to power the host on"}
	allSet(t, "State", reflect.ValueOf(st))
	allSet(t, "State.EarlierHosts[0]", reflect.ValueOf(st.EarlierHosts[0]))
	allSet(t, "State.Backup", reflect.ValueOf(*st.Backup))
	return st
}

// allSet fails t if a field of the struct v (what names it) is zero.
func allSet(t testing.TB, what string, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("remediationtest: Contract writes no %s.%s: set it in fullState", what, v.Type().Field(i).Name)
		}
	}
}

// markOf is how the kit writes the health checker's mark on the stores:
// Stores.Mark, World.SetNeedsRemediation, or Record.Unhealthy through
// Records' RecordStore; nil if none.
func markOf(s Stores) func(ctx context.Context, machine string, on bool) error {
	switch {
	case s.Mark != nil:
		return s.Mark
	case s.World != nil:
		return s.World.SetNeedsRemediation
	}
	rs, ok := remediation.RecordStoreOf(s.Machines)
	if !ok {
		return nil
	}
	return func(ctx context.Context, machine string, on bool) error {
		r, err := rs.Get(ctx, machine)
		if err != nil {
			return err
		}
		r.Unhealthy = on
		_, err = rs.Update(ctx, r)
		return err
	}
}

// checkWatchers checks the Watch of a MachineWatcher (writes: SaveState,
// and the health checker's mark) and of the RecordWatcher behind Records
// (writes: RecordStore.Update): Reconciler.Loop does not poll a store
// that can watch, so a Watch that does not report would leave a Machine
// marked unhealthy unseen until the next resync.
func checkWatchers(ctx context.Context, t testing.TB, machines remediation.MachineStore, mark func(context.Context, string, bool) error) {
	t.Helper()
	if mw, ok := machines.(remediation.MachineWatcher); ok {
		if mark == nil {
			t.Errorf("the MachineStore is a remediation.MachineWatcher, but the kit cannot write the health checker's mark to check that its Watch reports it: set Stores.Mark (or Stores.World) in your NewStores")
			return
		}
		if !watchcheck.Check(ctx, t, "Machine s2 (MachineWatcher)",
			func(ctx context.Context) (<-chan struct{}, error) { return mw.Watch(ctx, "s2") },
			func(ctx context.Context, i int) error {
				if i%2 == 1 {
					// The health checker's mark: the change that starts a
					// remediation, not only the Reconciler's own writes.
					return mark(ctx, "s2", i%4 == 1)
				}
				rec, err := machines.Get(ctx, "s2")
				if err != nil {
					return err
				}
				return machines.SaveState(ctx, "s2", rec.Version, remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: i + 1})
			}) {
			return // Records' Watch is its RecordStore's: once is enough
		}
	}
	rs, ok := remediation.RecordStoreOf(machines)
	if !ok {
		return
	}
	if rw, ok := rs.(remediation.RecordWatcher); ok {
		watchcheck.Check(ctx, t, "record s2 (RecordWatcher)",
			func(ctx context.Context) (<-chan struct{}, error) { return rw.Watch(ctx, "s2") },
			func(ctx context.Context, i int) error {
				r, err := rs.Get(ctx, "s2")
				if err != nil {
					return err
				}
				r.OutOfService = !r.OutOfService
				_, err = rs.Update(ctx, r)
				return err
			})
	}
}

// checkRecordStore checks a RecordStore's Update directly: a compare-and-
// swap on Version. Through Records' sequential calls a store whose Update
// ignores the version looks right (the adapter reads before each write),
// but Records' read-change-write loops (SetOutOfService, AddMetadata,
// RemoveNeedsRemediation) would then write an old State back over a
// concurrent SaveState.
func checkRecordStore(ctx context.Context, t testing.TB, rs remediation.RecordStore) {
	t.Helper()
	if _, err := rs.Get(ctx, "nope"); !errors.Is(err, remediation.ErrNotFound) {
		t.Errorf("RecordStore.Get of a missing record: %v, want an error wrapping remediation.ErrNotFound", err)
	}
	r, err := rs.Get(ctx, "s2")
	if err != nil {
		t.Errorf("RecordStore.Get: %v", err)
		return
	}
	mine := r
	mine.OutOfService = !r.OutOfService
	w, err := rs.Update(ctx, mine)
	if err != nil {
		t.Errorf("RecordStore.Update with the current version: %v", err)
		return
	}
	if w.Version == r.Version {
		t.Errorf("RecordStore.Update returned version %q, the one it was given: want a new version", w.Version)
	}
	stale := r
	stale.State = remediation.State{Phase: remediation.PhaseFailed, Attempt: 9}
	if _, err := rs.Update(ctx, stale); !errors.Is(err, remediation.ErrConflict) {
		t.Errorf("RecordStore.Update with a stale version: %v, want an error wrapping remediation.ErrConflict (Records' read-change-write would write an old State back over a concurrent one)", err)
	}
	if cur, err := rs.Get(ctx, "s2"); err != nil || cur.OutOfService != mine.OutOfService || !cur.State.Equal(r.State) || cur.Version != w.Version {
		t.Errorf("after a refused Update: %+v, %v; want the record of the accepted one (version %q)", cur, err, w.Version)
	}
}
