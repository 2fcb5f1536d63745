package remediationtest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/remediation"
)

// raceAdmissions writes the admission record from many reconcilers at
// once, each admitting its own Machine from one read, in racecheck.Rounds
// to racecheck.MaxRounds rounds (racecheck.Enough), writer i through s if
// i is even and through other (a second process's handle on the record)
// if odd: exactly one must succeed, the others fail with ErrConflict, and
// the record read back through other must admit the winner's Machine and
// none of the others' (the storm guard's admission is atomic only through
// this compare-and-swap: an AdmissionStore whose version check is not
// atomic with its write admits two hosts under a limit of one, and one
// whose check is atomic only within one process passes when every writer
// goes through one handle). other nil: every writer goes through s.
func raceAdmissions(ctx context.Context, t testing.TB, s, other remediation.AdmissionStore) {
	t.Helper()
	if other == nil {
		other = s
	}
	handles := [2]remediation.AdmissionStore{s, other}
	var reads atomic.Uint64
	reader := func() { _, _ = handles[reads.Add(1)%2].GetAdmissions(ctx) }
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := s.GetAdmissions(ctx)
		if err != nil {
			t.Fatalf("GetAdmissions: %v", err)
		}
		machine := func(i int) string { return fmt.Sprintf("race-%d-%d", round, i) }
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			a := read
			a.Machines = append(slices.Clone(read.Machines), machine(i))
			return handles[i%2].PutAdmissions(ctx, a)
		}, reader)
		winner, err := racecheck.OneWinner(errs, remediation.ErrConflict, "admissions")
		if err != nil {
			t.Errorf("%v (two hosts off under a storm-guard limit of one)", err)
			return
		}
		got, err := other.GetAdmissions(ctx)
		if err != nil {
			t.Fatalf("GetAdmissions: %v", err)
		}
		var admitted []string
		for i := 0; i < racecheck.Writers; i++ {
			if got.Has(machine(i)) {
				admitted = append(admitted, machine(i))
			}
		}
		if len(admitted) != 1 || admitted[0] != machine(winner) || got.Version == read.Version || len(got.Machines) != len(read.Machines)+1 {
			t.Errorf("after %d admissions at once, %s's alone accepted: the record admits %v of them (%d Machines, was %d), version %q (was %q); want %s only, under a new version",
				racecheck.Writers, machine(winner), admitted, len(got.Machines), len(read.Machines), got.Version, read.Version, machine(winner))
			return
		}
	}
}

// raceState is the State writer i of round round saves in raceSaveState
// and raceRecordUpdate: its Attempt tells the writers apart.
func raceState(round, i int) remediation.State {
	phases := [...]remediation.Phase{remediation.PhasePowerOffRequested, remediation.PhaseNodeDeleted, remediation.PhasePoweringOn}
	return remediation.State{Phase: phases[i%len(phases)], Attempt: round*racecheck.Writers + i + 1}
}

// raceSaveState saves the State of Machine name from many reconcilers at
// once, all from one read, in racecheck.Rounds to racecheck.MaxRounds
// rounds (racecheck.Enough), writer i through ms if i is even and through
// other (a second process's handle on the Machines) if odd: exactly one
// must succeed, the others fail with ErrConflict, and the Machine read
// back through other must hold the winner's State under a new version
// (two reconciles from one read would both start, one's phase silently
// overwritten: a MachineStore whose version check is not atomic with its
// write passes every check made one call at a time, and one whose check
// is atomic only within one process passes when every writer goes
// through one handle). other nil: every writer goes through ms.
func raceSaveState(ctx context.Context, t testing.TB, ms, other remediation.MachineStore, name string) {
	t.Helper()
	if other == nil {
		other = ms
	}
	handles := [2]remediation.MachineStore{ms, other}
	var reads atomic.Uint64
	reader := func() { _, _ = handles[reads.Add(1)%2].Get(ctx, name) }
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := ms.Get(ctx, name)
		if err != nil {
			t.Fatalf("Machines.Get: %v", err)
		}
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			return handles[i%2].SaveState(ctx, name, read.Version, raceState(round, i))
		}, reader)
		winner, err := racecheck.OneWinner(errs, remediation.ErrConflict, "SaveStates of machine "+name)
		if err != nil {
			t.Errorf("%v (two reconciles from one read would both start, one's phase overwritten)", err)
			return
		}
		got, err := other.Get(ctx, name)
		if err != nil {
			t.Fatalf("Machines.Get: %v", err)
		}
		if want := raceState(round, winner); got.State.Phase != want.Phase || got.State.Attempt != want.Attempt || got.Version == read.Version {
			t.Errorf("after %d SaveStates of machine %s at once, writer %d alone accepted: the store holds phase %v attempt %d, version %q (was %q); want the winner's phase %v attempt %d under a new version",
				racecheck.Writers, name, winner, got.State.Phase, got.State.Attempt, got.Version, read.Version, want.Phase, want.Attempt)
			return
		}
	}
}

// raceRecordUpdate is raceSaveState on a RecordStore's own Update (behind
// remediation.Records; Records' read-change-write loops count on its
// ErrConflict): writer i changes record name's State through rs if i is
// even and through other if odd, all from one read; exactly one must
// succeed, and the record read back through other must hold its State
// under a new version. other nil: every writer goes through rs.
func raceRecordUpdate(ctx context.Context, t testing.TB, rs, other remediation.RecordStore, name string) {
	t.Helper()
	if other == nil {
		other = rs
	}
	handles := [2]remediation.RecordStore{rs, other}
	var reads atomic.Uint64
	reader := func() { _, _ = handles[reads.Add(1)%2].Get(ctx, name) }
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := rs.Get(ctx, name)
		if err != nil {
			t.Fatalf("RecordStore.Get: %v", err)
		}
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			r := read
			r.State = raceState(round, i)
			_, err := handles[i%2].Update(ctx, r)
			return err
		}, reader)
		winner, err := racecheck.OneWinner(errs, remediation.ErrConflict, "RecordStore Updates of record "+name)
		if err != nil {
			t.Errorf("%v (Records' read-change-write would write one State over a concurrent one)", err)
			return
		}
		got, err := other.Get(ctx, name)
		if err != nil {
			t.Fatalf("RecordStore.Get: %v", err)
		}
		if want := raceState(round, winner); got.State.Phase != want.Phase || got.State.Attempt != want.Attempt || got.Version == read.Version {
			t.Errorf("after %d RecordStore Updates of record %s at once, writer %d alone accepted: the store holds phase %v attempt %d, version %q (was %q); want the winner's phase %v attempt %d under a new version",
				racecheck.Writers, name, winner, got.State.Phase, got.State.Attempt, got.Version, read.Version, want.Phase, want.Attempt)
			return
		}
	}
}
