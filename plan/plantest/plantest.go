// Package plantest is the conformance kit for plan.Store implementations
// (plans kept in a database of your own): StoreContract checks what the
// Executor and the operators' commands rely on: ErrNotFound, ErrExists,
// the store's own check that no server is in two unfinished plans
// (ErrServerInPlan) on Create and on a Put that makes a plan hold servers
// (a dry run's DryRun cleared, a plan that ended set unfinished again:
// plan.NewlyHolds), a Put setting DryRun on a running plan refused
// (ErrDryRunSet), a Put changing a plan's servers refused,
// compare-and-swap on Version (ErrConflict, nothing written), and List;
// and then both under writers at once: in each of racecheck.Rounds to
// racecheck.MaxRounds rounds (racecheck.Enough), racecheck.Writers Puts of
// one plan from one read, released together, and as many Creates of plans
// over one server, half of them through Stores.Other (a second process's
// handle on the same plans), must leave exactly one winner, the others
// refused with ErrConflict and ErrServerInPlan, and the store's own
// contents (read back through Other) holding the winner's write and one
// unfinished plan over the server; and as many writers, half Putting a
// dry-run plan of their own over one server with DryRun cleared (a Put
// that makes a plan hold servers), half Creating a real plan over it,
// through both handles, must leave at most one accepted, the others
// refused with ErrServerInPlan (or ErrConflict), and at most one
// unfinished real plan over the server, the accepted one's (a store whose check is not atomic with
// its write, in its lock or transaction, fails; so does one whose check is
// atomic only within one process, such as a sync.Mutex around read, check
// and write on shared storage, but only if Other is given: with Other nil
// every writer goes through one handle and such a store passes).
//
// FleetContract checks a plan.Fleet's job contract through Observe (and,
// for a ViewFleet, ObserveView of full and partial views), as the Executor
// sees it: CreateJob idempotent per job UUID, jobs that outlive their
// plan, a cancelled job kept and reported ended, ObserveView's partiality
// if the fleet is a ViewFleet (a partial view observing its own server),
// and the optional abilities: a HeadnodeFleet with a headnode reports its
// services up, a ShardFleet's freeze and unfreeze are observed and its
// shard reported healthy while frozen, and, when the caller names the
// shard's primary (Fleet.ShardPrimary), the fleet reports it
// (Observations.ShardPrimary), the Executor (on a ViewStore for a
// ViewFleet) freezes the shard before that server's job, and the plan ends
// with that reboot done and the shard unfrozen. An empty
// Fleet.ShardPrimary means the fleet has no shard among its Servers (a
// ShardFleet type may have none, as fake.NewFleet with an empty primary):
// the primary is not checked, so a kit caller whose fleet has a shard must
// name its primary, and a fleet that never reports the primary named
// fails.
//
// StateMachine runs the Executor on a fresh store per case with rapid,
// against a second writer, crashes, clock jumps and fleet faults, checked
// against the ground truth of a fake fleet (its doc says what it checks).
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

// Stores are the handles of one fresh, empty plan store under test.
type Stores struct {
	// Store is the handle the kit checks, and StateMachine's executors
	// and operator use.
	Store plan.Store
	// Other is a second handle on the same plans, as another process
	// (rebootctl beside the executor, a second executor, a second
	// rebootctl plan create) has it: its own client, connection, Open of
	// the same directory or database, never Store given again (the kit fails when it is the same pointer). Its reads
	// must be current (not from a cache that lags): StoreContract's race
	// reads the ground truth through it. StoreContract's race sends half
	// its writers through each handle, so a store whose checks are
	// atomic with its writes only within one process (a sync.Mutex
	// around read, check and write on shared storage) fails. nil: the
	// race runs through Store alone, and cannot catch such a store (give
	// nil only where the storage admits one handle per process, as
	// bbolt's exclusive file lock does). StateMachine uses Store only.
	Other plan.Store
	// Close, if set, is called when the check or the case is done; it
	// closes both handles.
	Close func()
}

// NewStore returns the handles of a fresh, empty store.
type NewStore func() (Stores, error)

// runningPlan is a running plan of the servers named.
func runningPlan(uuid string, at time.Time, servers ...string) (plan.Plan, error) {
	fleet := make([]plan.Server, len(servers))
	for i, s := range servers {
		fleet[i] = plan.Server{UUID: s, Hostname: "host-" + s, Platform: "1"}
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(len(servers)), CreatedAt: at})
	if err != nil {
		return plan.Plan{}, fmt.Errorf("plantest: %w", err)
	}
	return plan.Run(p)
}

// StoreContract runs the store's contract checks (see the package doc).
func StoreContract(t testing.TB, newStore NewStore) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stores, err := newStore()
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	if stores.Close != nil {
		defer stores.Close()
	}
	s := stores.Store
	if racecheck.Same(stores.Other, s) {
		t.Errorf("plantest: Stores.Other is Stores.Store given again: give a second handle on the same plans (its own client, connection or open of the same storage), or nil where the storage admits one handle per process")
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	one, err := runningPlan("plan-one", at, "u1", "u2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "plan-one"); !errors.Is(err, plan.ErrNotFound) {
		t.Errorf("Get of a missing plan: %v, want an error wrapping plan.ErrNotFound", err)
	}
	if err := s.Create(ctx, one); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := s.Get(ctx, "plan-one")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.UUID != "plan-one" || len(got.Reboots) != 2 || got.State != plan.StateRunning || got.Version == "" {
		t.Errorf("Get after Create: uuid %q, %d reboots, state %v, version %q; want the plan created, with a version",
			got.UUID, len(got.Reboots), got.State, got.Version)
	}
	// The same request again (an operator's retry after a lost answer)
	// may succeed, as it does on etcd.Store, or fail with ErrExists;
	// another plan under that uuid must fail with ErrExists.
	if err := s.Create(ctx, one); err != nil && !errors.Is(err, plan.ErrExists) {
		t.Errorf("Create of the same plan again: %v, want success (idempotent) or an error wrapping plan.ErrExists", err)
	}
	other, err := runningPlan("plan-one", at, "u9")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, other); !errors.Is(err, plan.ErrExists) {
		t.Errorf("Create of another plan under an existing uuid: %v, want an error wrapping plan.ErrExists", err)
	}
	overlap, _ := runningPlan("plan-two", at, "u2", "u3")
	if err := s.Create(ctx, overlap); !errors.Is(err, plan.ErrServerInPlan) {
		t.Errorf("Create of a plan with a server of another unfinished plan: %v, want an error wrapping plan.ErrServerInPlan (a server rebooted by two plans at once)", err)
	}
	apart, _ := runningPlan("plan-three", at, "u4")
	if err := s.Create(ctx, apart); err != nil {
		t.Errorf("Create of a plan of other servers: %v", err)
	}

	// Compare-and-swap.
	mine := got
	mine.Reboots[0].Error = "mine"
	if err := s.Put(ctx, mine); err != nil {
		t.Fatalf("Put with the current version: %v", err)
	}
	after, err := s.Get(ctx, "plan-one")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if after.Version == got.Version || after.Reboots[0].Error != "mine" {
		t.Errorf("after Put: version %q (was %q), error %q; want a new version and the write", after.Version, got.Version, after.Reboots[0].Error)
	}
	stale := got
	stale.Reboots[0].Error = "stale"
	if err := s.Put(ctx, stale); !errors.Is(err, plan.ErrConflict) {
		t.Errorf("Put with a stale version: %v, want an error wrapping plan.ErrConflict (an operator's cancel would be overwritten)", err)
	}
	if cur, _ := s.Get(ctx, "plan-one"); cur.Reboots[0].Error != "mine" {
		t.Errorf("a refused Put wrote: error %q", cur.Reboots[0].Error)
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 2 {
		t.Errorf("List: %d plans, %v; want 2", len(all), err)
	}
	putChecks(ctx, t, s, at)
	raceChecks(ctx, t, s, stores.Other, at)
}
