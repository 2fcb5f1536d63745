package plantest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// review40acStore is a plan.Store a user might write from plan.Store's
// doc: Create checks CheckOthers, Put compare-and-swaps on Version, and
// nothing more: its Put lets a plan that holds no server (a dry run, or a
// plan that ended) start holding servers another unfinished plan holds.
type review40acStore struct {
	mu   sync.Mutex
	docs map[string]plan.Plan
	ver  map[string]int
}

func newReview40acStore() *review40acStore {
	return &review40acStore{docs: map[string]plan.Plan{}, ver: map[string]int{}}
}

func (s *review40acStore) Get(_ context.Context, uuid string) (plan.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.docs[uuid]
	if !ok {
		return plan.Plan{}, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	p = p.Clone()
	p.Version = strconv.Itoa(s.ver[uuid])
	return p, nil
}

func (s *review40acStore) Create(ctx context.Context, p plan.Plan) error {
	others, err := s.List(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.docs[p.UUID]; ok {
		return fmt.Errorf("%w: %s", plan.ErrExists, p.UUID)
	}
	if err := plan.CheckOthers(p, others); err != nil {
		return err
	}
	s.docs[p.UUID] = p.Clone()
	s.ver[p.UUID]++
	return nil
}

func (s *review40acStore) Put(_ context.Context, p plan.Plan) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.docs[p.UUID]; !ok {
		return fmt.Errorf("%w: %s", plan.ErrNotFound, p.UUID)
	}
	if p.Version != strconv.Itoa(s.ver[p.UUID]) {
		return fmt.Errorf("version %s, current %d: %w", p.Version, s.ver[p.UUID], plan.ErrConflict)
	}
	s.docs[p.UUID] = p.Clone()
	s.ver[p.UUID]++
	return nil
}

func (s *review40acStore) List(ctx context.Context) ([]plan.Plan, error) {
	s.mu.Lock()
	var ids []string
	for id := range s.docs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var out []plan.Plan
	for _, id := range ids {
		p, err := s.Get(ctx, id)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// review40acHolders counts the unfinished plans that are not dry runs
// and hold server id, read from the store itself.
func review40acHolders(t *testing.T, s plan.Store, id string) []string {
	t.Helper()
	all, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range all {
		if !p.Unfinished() || p.DryRun {
			continue
		}
		for _, r := range p.Reboots {
			if r.ServerUUID == id {
				out = append(out, p.UUID)
			}
		}
	}
	return out
}

// TestReview40ac_StoreContractMissesPutThatHoldsServers: plantest's doc
// says StoreContract checks "the store's own check that no server is in
// two unfinished plans (ErrServerInPlan)", and plan's doc says a write
// that makes a plan hold servers (an ended plan set unfinished again, a
// dry run's DryRun cleared: NewlyHolds) "is checked against the other
// plans as Create checks a new one", in every store. The kit only ever
// checks Create: a store whose Put does not check lets a dry-run plan
// promoted to a real one (or an ended plan resumed by a tool's Edit) hold
// a server another running plan holds, so two plans reboot it at once,
// each counting its own concurrency. The store below is such a store
// (ground truth: its own List shows two unfinished plans holding u1); the
// kit passes it.
func TestReview40ac_StoreContractMissesPutThatHoldsServers(t *testing.T) {
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
	// Ground truth that the store is broken: a dry run over u1, a real
	// plan over u1 (allowed: a dry run holds nothing), then the dry run
	// promoted (DryRun cleared) through Put.
	s := newReview40acStore()
	if err := s.Create(ctx, mk("dry", true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, mk("real", false)); err != nil {
		t.Fatal(err)
	}
	dry, _ := s.Get(ctx, "dry")
	dry.DryRun = false
	putErr := s.Put(ctx, dry)
	holders := review40acHolders(t, s, "u1")
	if putErr == nil && len(holders) < 2 {
		t.Fatalf("setup: the broken store refused or did not write: %v %v", putErr, holders)
	}
	t.Logf("ground truth: after Put (err %v), unfinished real plans holding u1: %v", putErr, holders)
	// The project's own check refuses it (plan.NewlyHolds + CheckOthers).
	if !plan.NewlyHolds(true, true, true, false) {
		t.Fatal("setup: plan.NewlyHolds says clearing DryRun holds nothing new")
	}

	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		plantest.StoreContract(r, func() (plantest.Stores, error) { return plantest.Stores{Store: newReview40acStore()}, nil })
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatalf("StoreContract passed a store whose Put lets a plan start holding a server another unfinished plan holds (ground truth: %v both unfinished over u1): the kit never checks ErrServerInPlan on Put (NewlyHolds: a dry run promoted, an ended plan resumed)", holders)
	}
	t.Logf("caught: %v", r.failed)
}

// review40acSilentServices is a Fleet of one's own whose Observe leaves
// ServerObs.ServicesUp false (its zero value), the twin of issue 40 point
// 1's HeadnodeServicesUp: the servers are up and healthy (the honest fake
// says so), the field is just never set.
type review40acSilentServices struct{ *fake.Fleet }

func (f review40acSilentServices) strip(o plan.Observations) plan.Observations {
	for id, s := range o.Servers {
		s.ServicesUp = false
		o.Servers[id] = s
	}
	return o
}

func (f review40acSilentServices) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	return f.strip(o), err
}

func (f review40acSilentServices) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	return f.strip(o), err
}

// TestReview40ac_FleetContractPassesSilentServices: FleetContract "checks
// the job contract the Executor relies on, through Observe ... as the
// Executor sees it", on a fleet whose Servers are "up, whose reboot jobs
// succeed", and was taught (round 24) to catch a fleet that leaves
// HeadnodeServicesUp false. A fleet that leaves ServerObs.ServicesUp
// false stalls every reboot the same way: each waits in wait_services for
// ServicesTimeout (1 h) and fails, and the plan fails with every server
// rebooted (shown below by running the Executor on it). The kit never
// reads Observations.Servers, so it passes it (and one that reports no
// server at all, which holds every plan at "servers offline" for good).
func TestReview40ac_FleetContractPassesSilentServices(t *testing.T) {
	newFleet := review40abFleet("", nil, func(f *fake.Fleet) plan.Fleet { return review40acSilentServices{f} })
	// Ground truth: the executor on that fleet fails the healthy reboot.
	f, _ := newFleet()
	p, _, err := plan.Create(f.Servers[:1], plan.CreateOptions{UUID: "silent", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	p, _ = plan.Run(p)
	store := fake.NewPlanStore()
	if err := store.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exec := &plan.Executor{Fleet: f.Fleet, Store: store, Now: func() time.Time { return now }}
	for i := 0; i < 200; i++ {
		if _, err := exec.Pass(context.Background(), "silent"); err != nil && !errors.Is(err, plan.ErrConflict) {
			t.Fatalf("pass: %v", err)
		}
		f.Advance(time.Minute)
		now = now.Add(time.Minute)
	}
	got, _ := store.Get(context.Background(), "silent")
	t.Logf("the executor on that fleet, after 200 min: state %s, waiting %q, reboot step %s, error %q",
		got.State, got.Waiting, got.Reboots[0].Step, got.Reboots[0].Error)

	if fails := review40abRun(t, newFleet); len(fails) == 0 {
		t.Fatalf("FleetContract passed a fleet whose Observe never sets ServerObs.ServicesUp on a healthy fleet: every reboot waits ServicesTimeout and fails (here: plan %s, reboot %s, %q)",
			got.State, got.Reboots[0].Step, got.Reboots[0].Error)
	} else {
		t.Logf("caught: %v", fails)
	}
}

// review40acNoServers is a Fleet of one's own whose Observe reports its
// jobs but no server (Observations.Servers left nil).
type review40acNoServers struct{ *fake.Fleet }

func (f review40acNoServers) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	o.Servers = nil
	return o, err
}

func (f review40acNoServers) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	o.Servers = nil
	return o, err
}

// TestReview40ac_FleetContractPassesFleetWithoutServers: a Fleet whose
// Observe never fills Observations.Servers ("a server of the plan missing
// from the result counts as offline") holds every plan for good: with
// concurrency 1 and the plan's two servers "offline", no job is ever
// created (shown below by the Executor), and the plan never ends. The
// healthy fleet FleetContract is given has its servers up, yet the kit
// never reads Observations.Servers, and passes it.
func TestReview40ac_FleetContractPassesFleetWithoutServers(t *testing.T) {
	newFleet := review40abFleet("", nil, func(f *fake.Fleet) plan.Fleet { return review40acNoServers{f} })
	f, _ := newFleet()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, _, err := plan.Create(f.Servers, plan.CreateOptions{UUID: "noservers", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	p, _ = plan.Run(p)
	store := fake.NewPlanStore()
	if err := store.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	now := at
	exec := &plan.Executor{Fleet: f.Fleet, Store: store, Now: func() time.Time { return now }}
	for i := 0; i < 300; i++ {
		if _, err := exec.Pass(context.Background(), "noservers"); err != nil && !errors.Is(err, plan.ErrConflict) {
			t.Fatalf("pass: %v", err)
		}
		f.Advance(time.Minute)
		now = now.Add(time.Minute)
	}
	got, _ := store.Get(context.Background(), "noservers")
	t.Logf("the executor on that fleet, after 300 min: state %s, unfinished %v, waiting %q", got.State, got.Unfinished(), got.Waiting)
	if !got.Unfinished() {
		t.Fatalf("setup: the plan ended: %s", got.State)
	}
	if fails := review40abRun(t, newFleet); len(fails) == 0 {
		t.Fatalf("FleetContract passed a fleet whose Observe reports no server of a healthy fleet: every plan on it waits for good (%q)", got.Waiting)
	} else {
		t.Logf("caught: %v", fails)
	}
}
