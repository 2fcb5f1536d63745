package remediationtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/remediation"
)

// raceAdmissions writes the admission record from many reconcilers at
// once, each admitting its own Machine from one read, in racecheck.Rounds
// to racecheck.MaxRounds rounds (racecheck.Enough): exactly one must
// succeed, the others fail with ErrConflict, and the record read back must
// admit the winner's Machine and none of the others' (the storm guard's
// admission is atomic only through this compare-and-swap: an
// AdmissionStore whose version check is not atomic with its write admits
// two hosts under a limit of one).
func raceAdmissions(ctx context.Context, t testing.TB, s remediation.AdmissionStore) {
	t.Helper()
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := s.GetAdmissions(ctx)
		if err != nil {
			t.Fatalf("GetAdmissions: %v", err)
		}
		machine := func(i int) string { return fmt.Sprintf("race-%d-%d", round, i) }
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			a := read
			a.Machines = append(slices.Clone(read.Machines), machine(i))
			return s.PutAdmissions(ctx, a)
		}, func() { _, _ = s.GetAdmissions(ctx) })
		winner, err := racecheck.OneWinner(errs, remediation.ErrConflict, "admissions")
		if err != nil {
			t.Errorf("%v (two hosts off under a storm-guard limit of one)", err)
			return
		}
		got, err := s.GetAdmissions(ctx)
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
