package plantest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// review40afDisk is the storage every handle shares, with the one lock
// that makes a check atomic with its write across handles (a database's
// transaction, etcd's Txn).
type review40afDisk struct {
	mu   sync.Mutex
	docs map[string]plan.Plan
	ver  map[string]int
}

// review40afHandle is a plan.Store a user might write: Create checks
// CheckOthers and writes in one transaction (the lock), Put compares and
// swaps the plan's version and checks plan.CheckPut in one transaction
// too, but against the other plans as listed just before it (a List,
// then the transaction on the plan's own document): so a Put that makes a
// plan hold servers (a dry run promoted, an ended plan resumed:
// plan.NewlyHolds) is not atomic with a Create (or another such Put) over
// the same server. Every check made one call at a time passes, and so do
// Puts of one plan at once and Creates at once.
type review40afHandle struct {
	d         *review40afDisk
	afterList func() // between Put's List and its transaction (test only)
}

func newReview40afDisk() *review40afDisk {
	return &review40afDisk{docs: map[string]plan.Plan{}, ver: map[string]int{}}
}

func (h *review40afHandle) getLocked(uuid string) (plan.Plan, bool) {
	p, ok := h.d.docs[uuid]
	if !ok {
		return plan.Plan{}, false
	}
	p = p.Clone()
	p.Version = strconv.Itoa(h.d.ver[uuid])
	return p, true
}

func (h *review40afHandle) allLocked() []plan.Plan {
	out := make([]plan.Plan, 0, len(h.d.docs))
	for id := range h.d.docs {
		p, _ := h.getLocked(id)
		out = append(out, p)
	}
	return out
}

func (h *review40afHandle) Get(_ context.Context, uuid string) (plan.Plan, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	p, ok := h.getLocked(uuid)
	if !ok {
		return plan.Plan{}, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	return p, nil
}

func (h *review40afHandle) List(context.Context) ([]plan.Plan, error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.allLocked(), nil
}

func (h *review40afHandle) Create(_ context.Context, p plan.Plan) error {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if _, ok := h.d.docs[p.UUID]; ok {
		return fmt.Errorf("%w: %s", plan.ErrExists, p.UUID)
	}
	if err := plan.CheckOthers(p, h.allLocked()); err != nil {
		return err
	}
	h.d.docs[p.UUID] = p.Clone()
	h.d.ver[p.UUID]++
	return nil
}

func (h *review40afHandle) Put(ctx context.Context, p plan.Plan) error {
	others, err := h.List(ctx)
	if err != nil {
		return err
	}
	if h.afterList != nil {
		h.afterList()
	}
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	cur, ok := h.getLocked(p.UUID)
	if !ok {
		return fmt.Errorf("%w: %s", plan.ErrNotFound, p.UUID)
	}
	if p.Version != cur.Version {
		return fmt.Errorf("version %s, current %s: %w", p.Version, cur.Version, plan.ErrConflict)
	}
	if err := plan.CheckPut(cur, p, func() ([]plan.Plan, error) { return others, nil }); err != nil {
		return err
	}
	h.d.docs[p.UUID] = p.Clone()
	h.d.ver[p.UUID]++
	return nil
}

// TestReview40af_StoreContractPassesPutHoldsRacingCreate: plantest's doc
// says StoreContract checks "the store's own check that no server is in
// two unfinished plans (ErrServerInPlan) on Create and on a Put that makes
// a plan hold servers", "and then both under writers at once", and that
// "a store whose check is not atomic with its write, in its lock or
// transaction, fails". The race only ever races Puts of one plan that
// hold nothing new (an Error field changed) and Creates against Creates:
// never a Put that makes a plan hold servers (NewlyHolds: rebootctl
// promoting a dry run, a tool resuming an ended plan) beside a Create
// over the same server. The store above makes that check against a List
// read before its transaction: the kit passes it, while (ground truth,
// read back from the store) a dry run promoted beside a plan created over
// its server leaves both unfinished real plans over u1, each rebooting it
// under its own concurrency.
func TestReview40af_StoreContractPassesPutHoldsRacingCreate(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(uuid string, dry bool) plan.Plan {
		fleet := []plan.Server{{UUID: "u1", Hostname: "host-u1", Platform: "1"}}
		p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll,
			Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: at, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if p, err = plan.Run(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Ground truth: rebootctl promotes the dry run (handle a) while
	// another rebootctl creates a plan over u1 (handle b), the Create
	// landing between the Put's List and its transaction.
	d := newReview40afDisk()
	a, b := &review40afHandle{d: d}, &review40afHandle{d: d}
	if err := a.Create(ctx, mk("dry", true)); err != nil {
		t.Fatal(err)
	}
	var createErr error
	a.afterList = func() { createErr = b.Create(ctx, mk("real", false)) }
	dry, _ := a.Get(ctx, "dry")
	dry.DryRun = false
	putErr := a.Put(ctx, dry)
	a.afterList = nil
	holders := review40acHolders(t, b, "u1")
	if putErr != nil || createErr != nil || len(holders) != 2 {
		t.Fatalf("setup: want the promotion and the Create both accepted: put %v, create %v, holders %v", putErr, createErr, holders)
	}
	// One call at a time, the store refuses the promotion.
	d2 := newReview40afDisk()
	s2 := &review40afHandle{d: d2}
	_ = s2.Create(ctx, mk("dry", true))
	_ = s2.Create(ctx, mk("real", false))
	dry2, _ := s2.Get(ctx, "dry")
	dry2.DryRun = false
	seqErr := s2.Put(ctx, dry2)
	t.Logf("ground truth: promotion beside a Create over u1: put %v, create %v, unfinished real plans over u1: %v; one at a time the promotion is refused: %v",
		putErr, createErr, holders, seqErr)

	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		plantest.StoreContract(r, func() (plantest.Stores, error) {
			d := newReview40afDisk()
			return plantest.Stores{Store: &review40afHandle{d: d}, Other: &review40afHandle{d: d}}, nil
		})
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatalf("StoreContract passed a store whose Put checks the servers a plan newly holds against a List read before its write (ground truth: %v both unfinished real plans over u1 after a dry run's promotion beside a Create): the race never sends a Put that makes a plan hold servers beside a Create over them", holders)
	}
	t.Logf("caught: %v", r.failed)
}

// review40afNoPrimary is a ShardFleet (it has a database shard: freeze
// and unfreeze work and are observed) whose Observe never sets
// Observations.ShardPrimary: the zero value issue 40 point 1 is about,
// for the shard instead of the headnode.
type review40afNoPrimary struct{ *fake.Fleet }

func (f review40afNoPrimary) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	o.ShardPrimary = ""
	return o, err
}

func (f review40afNoPrimary) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	o.ShardPrimary = ""
	return o, err
}

// review40afRunPlan runs a plan over s1 and s2 on fleet (built by
// review40abFleet with the primary on s1) to its end with the Executor on
// a fake clock, and returns the fleet's own count of reboots of s1 and of
// freezes.
func review40afRunPlan(t *testing.T, wrap func(*fake.Fleet) plan.Fleet) (rebootsS1, freezes int) {
	t.Helper()
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var servers []fake.FleetServer
	for _, id := range []string{"s1", "s2"} {
		servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
			Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
	}
	f := fake.NewFleet(clk.Now, "s1", servers...)
	p, _, err := plan.Create(f.Servers(), plan.CreateOptions{UUID: "plan-shard", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatal(err)
	}
	store := fake.NewPlanStore()
	if err := store.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	e := &plan.Executor{Fleet: wrap(f), Store: store, Now: clk.Now}
	for i := 0; i < 2000; i++ {
		v, _ := e.Pass(ctx, "plan-shard")
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	_, freezes = f.Frozen()
	return f.Reboots()["s1"], freezes
}

// TestReview40af_FleetContractPassesShardFleetWithoutPrimary: plan's doc
// makes the shard freeze an optional ability ("only a ShardFleet is asked
// to freeze"), and FleetContract checks a ShardFleet's freeze, unfreeze
// and health, but never that it reports where the shard's primary is
// (Observations.ShardPrimary), the field the Executor decides the freeze
// on. A ShardFleet of one's own that leaves it at its zero value (as
// issue 40 point 1's fleet left HeadnodeServicesUp) passes the kit, and
// the Executor reboots the primary's server without ever freezing the
// shard (ground truth: the fake fleet's own reboot and freeze counts),
// while the same fleet with the field set freezes before it.
func TestReview40af_FleetContractPassesShardFleetWithoutPrimary(t *testing.T) {
	honestReboots, honestFreezes := review40afRunPlan(t, func(f *fake.Fleet) plan.Fleet { return f })
	silentReboots, silentFreezes := review40afRunPlan(t, func(f *fake.Fleet) plan.Fleet { return review40afNoPrimary{f} })
	if honestReboots == 0 || honestFreezes == 0 || silentReboots == 0 {
		t.Fatalf("setup: honest fleet: s1 rebooted %d times, %d freezes; silent fleet: s1 rebooted %d times", honestReboots, honestFreezes, silentReboots)
	}
	t.Logf("ground truth: with ShardPrimary reported, the primary s1 rebooted %d time(s) after %d freeze(s); with it left empty, s1 rebooted %d time(s) after %d freeze(s)",
		honestReboots, honestFreezes, silentReboots, silentFreezes)
	failed := review40abRun(t, review40abFleet("s1", nil, func(f *fake.Fleet) plan.Fleet { return review40afNoPrimary{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a plan.ShardFleet that never reports Observations.ShardPrimary: the Executor never freezes its shard (ground truth: the primary s1 rebooted %d time(s) after %d freeze(s))", silentReboots, silentFreezes)
	}
	t.Logf("caught: %v", failed)
}
