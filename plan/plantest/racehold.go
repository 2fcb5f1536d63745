package plantest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/racecheck"
	"github.com/rebootkit/rebootkit/plan"
)

// raceHolds races a Put that makes a plan newly hold a server
// (plan.NewlyHolds: a dry run's DryRun cleared, as rebootctl promotes it)
// against Creates of real plans over the same server: in each round,
// half of racecheck.Writers writers Put a dry-run plan of their own over
// the server with DryRun cleared, the others Create a real plan over it,
// writer i through handles[i%2] (so each kind goes through both handles).
// At most one may succeed, the others refused with ErrServerInPlan (or
// ErrConflict); the store's own contents, read back through other, must
// hold at most one unfinished plan over the server that is not a dry run,
// the winner's. A store that checks the servers a Put newly holds against
// plans read before its transaction passes every check made one call at
// a time and fails here.
func raceHolds(ctx context.Context, t testing.TB, handles [2]plan.Store, other plan.Store, reader func(), at time.Time) {
	t.Helper()
	for round, began := 0, time.Now(); !racecheck.EnoughTimes(4, round, began); round++ {
		server := fmt.Sprintf("hold-%d", round)
		id := func(i int) string { return fmt.Sprintf("plan-hold-%d-%d", round, i) }
		putter := func(i int) bool { return (i/2+round)%2 == 0 }
		plans := make([]plan.Plan, racecheck.Writers)
		for i := range plans {
			p, err := runningPlan(id(i), at, server)
			if err != nil {
				t.Fatal(err)
			}
			if putter(i) {
				p.DryRun = true
				if err := handles[i%2].Create(ctx, p); err != nil {
					t.Fatalf("Create of dry-run plan %s over %s: %v", p.UUID, server, err)
				}
				if p, err = other.Get(ctx, p.UUID); err != nil {
					t.Fatalf("Get %s: %v", p.UUID, err)
				}
				p.DryRun = false
			}
			plans[i] = p
		}
		errs := racecheck.Race(racecheck.Writers, func(i int) error {
			if putter(i) {
				return handles[i%2].Put(ctx, plans[i])
			}
			return handles[i%2].Create(ctx, plans[i])
		}, reader)
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner != "":
				t.Errorf("%d Puts clearing DryRun on dry-run plans and Creates of real plans, all over %s, at once: %s and %s both accepted, want at most one (the others refused with ErrServerInPlan): the store's check of the servers a Put newly holds is not atomic with its write (a server rebooted by two plans at once)",
					racecheck.Writers, server, winner, plans[i].UUID)
				return
			case err == nil:
				winner = plans[i].UUID
			case !errors.Is(err, plan.ErrServerInPlan) && !errors.Is(err, plan.ErrConflict):
				t.Errorf("Puts clearing DryRun beside Creates, all over %s: writer %d (%s) failed with %v, want success or an error wrapping %v or %v",
					server, i, plans[i].UUID, err, plan.ErrServerInPlan, plan.ErrConflict)
				return
			}
		}
		all, err := other.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var holders []string
		for _, q := range all {
			if !q.Unfinished() || q.DryRun {
				continue
			}
			for _, r := range q.Reboots {
				if r.ServerUUID == server {
					holders = append(holders, q.UUID)
					break
				}
			}
		}
		if len(holders) > 1 || len(holders) == 1 && holders[0] != winner {
			t.Errorf("after %d Puts clearing DryRun and Creates, all over %s, at once (accepted: %q), the store holds unfinished real plans %v over it; want at most one, the accepted write's (a server rebooted by two plans at once)",
				racecheck.Writers, server, winner, holders)
			return
		}
	}
}
