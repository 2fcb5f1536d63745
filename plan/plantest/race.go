package plantest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/plan"
)

// raceChecks calls the store from many writers at once (two executors,
// an operator's cancel beside a pass, two rebootctl plan create): in each
// round, racecheck.Writers Puts of one plan with one version, and as many
// Creates of plans over one server. Exactly one of each must succeed, the
// others fail with ErrConflict and ErrServerInPlan, and the store's own
// contents, read back, must hold the winner's write and one unfinished
// plan over the server: a store whose check is not atomic with its write
// passes every check made one call at a time.
func raceChecks(ctx context.Context, t testing.TB, s plan.Store, at time.Time) {
	t.Helper()
	p, err := runningPlan("plan-race", at, "race-put")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, p); err != nil {
		t.Fatalf("Create: %v", err)
	}
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		read, err := s.Get(ctx, "plan-race")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		mark := func(i int) string { return fmt.Sprintf("round %d writer %d", round, i) }
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			w := read.Clone()
			w.Version = read.Version
			w.Reboots[0].Error = mark(i)
			return s.Put(ctx, w)
		}, func() { _, _ = s.Get(ctx, "plan-race") })
		winner, err := racecheck.OneWinner(errs, plan.ErrConflict, "Puts of plan-race")
		if err != nil {
			t.Errorf("%v (an operator's cancel beside an executor's pass would be lost)", err)
			return
		}
		got, err := s.Get(ctx, "plan-race")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Reboots[0].Error != mark(winner) || got.Version == read.Version {
			t.Errorf("after %d Puts at once, writer %d alone accepted: the store holds %q, version %q (was %q); want the winner's write and a new version",
				racecheck.Writers, winner, got.Reboots[0].Error, got.Version, read.Version)
			return
		}
	}
	for round, began := 0, time.Now(); !racecheck.Enough(round, began); round++ {
		server := fmt.Sprintf("race-%d", round)
		id := func(i int) string { return fmt.Sprintf("plan-race-%d-%d", round, i) }
		plans := make([]plan.Plan, racecheck.Writers)
		for i := range plans {
			if plans[i], err = runningPlan(id(i), at, server); err != nil {
				t.Fatal(err)
			}
		}
		errs := racecheck.Race(racecheck.Writers, func(i int) error { return s.Create(ctx, plans[i]) },
			func() { _, _ = s.Get(ctx, "plan-race") })
		winner, err := racecheck.OneWinner(errs, plan.ErrServerInPlan, "Creates of plans over "+server)
		if err != nil {
			t.Errorf("%v (a server rebooted by two plans at once)", err)
			return
		}
		all, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var holders []string
		for _, q := range all {
			for _, r := range q.Reboots {
				if r.ServerUUID == server && q.Unfinished() && !q.DryRun {
					holders = append(holders, q.UUID)
				}
			}
		}
		if len(holders) != 1 || holders[0] != id(winner) {
			t.Errorf("after %d Creates at once over %s, %s alone accepted: the store holds unfinished plans %v over it; want %s only",
				racecheck.Writers, server, id(winner), holders, id(winner))
			return
		}
	}
}
