package plantest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// review40adRacyStore is a plan.Store that does every check plan's doc
// asks for (CheckOthers on Create, CheckPut and the version on Put) but
// not atomically with its write: it reads and checks under its lock, lets
// the lock go, and writes under it again. Called one at a time (as every
// check of the kit calls it) it is indistinguishable from a correct store;
// called by two writers at once (two executors, an operator's cancel
// beside a pass, two rebootctl plan create) it loses the compare-and-swap
// and lets two unfinished plans hold one server.
type review40adRacyStore struct {
	mu   sync.Mutex
	docs map[string]plan.Plan
	ver  map[string]int
	// between, if set, is called between the check and the write.
	between func()
}

func newReview40adRacyStore() *review40adRacyStore {
	return &review40adRacyStore{docs: map[string]plan.Plan{}, ver: map[string]int{}}
}

func (s *review40adRacyStore) Get(_ context.Context, uuid string) (plan.Plan, error) {
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

func (s *review40adRacyStore) list() []plan.Plan {
	var out []plan.Plan
	for id, p := range s.docs {
		p = p.Clone()
		p.Version = strconv.Itoa(s.ver[id])
		out = append(out, p)
	}
	return out
}

func (s *review40adRacyStore) Create(_ context.Context, p plan.Plan) error {
	s.mu.Lock()
	if _, ok := s.docs[p.UUID]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", plan.ErrExists, p.UUID)
	}
	err := plan.CheckOthers(p, s.list())
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.between != nil {
		s.between()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[p.UUID] = p.Clone()
	s.ver[p.UUID]++
	return nil
}

func (s *review40adRacyStore) Put(_ context.Context, p plan.Plan) error {
	s.mu.Lock()
	stored, ok := s.docs[p.UUID]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", plan.ErrNotFound, p.UUID)
	}
	if cur := s.ver[p.UUID]; p.Version != strconv.Itoa(cur) {
		s.mu.Unlock()
		return fmt.Errorf("version %s, current %d: %w", p.Version, cur, plan.ErrConflict)
	}
	all := s.list()
	err := plan.CheckPut(stored, p, func() ([]plan.Plan, error) { return all, nil })
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.between != nil {
		s.between()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[p.UUID] = p.Clone()
	s.ver[p.UUID]++
	return nil
}

func (s *review40adRacyStore) List(context.Context) ([]plan.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(), nil
}

// review40adBarrier returns a between hook that holds each of n callers
// until all n have checked.
func review40adBarrier(n int) func() {
	var wg sync.WaitGroup
	wg.Add(n)
	return func() { wg.Done(); wg.Wait() }
}

// TestReview40ad_StoreContractPassesStoreThatLosesCASUnderConcurrency:
// plantest's doc says StoreContract checks "compare-and-swap on Version
// (ErrConflict, nothing written)" and "the store's own check that no
// server is in two unfinished plans (ErrServerInPlan) on Create", and
// plan.CheckPut's doc that a store makes the check "where that list
// cannot change before the write (under its lock, in its transaction)";
// issue 40 point 4 asks for a kit that checks compare-and-swap "with a
// second writer". Every call the kit makes (StoreContract, and
// StateMachine's second writer, which writes between a pass's read and
// its save, one call at a time) is sequential, so a store whose check is
// not atomic with its write passes. Ground truth below, from the store's
// own contents: two writers with one version both succeed (the first
// writer's cancel is lost), and two plans over u1 are both created and
// unfinished (u1 rebooted by two plans at once, each counting its own
// concurrency).
func TestReview40ad_StoreContractPassesStoreThatLosesCASUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(uuid string, servers ...string) plan.Plan {
		var fleet []plan.Server
		for _, s := range servers {
			fleet = append(fleet, plan.Server{UUID: s, Hostname: "host-" + s, Platform: "1"})
		}
		p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: uuid, Target: "2", Select: plan.SelectAll,
			Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if p, err = plan.Run(p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Ground truth 1: two Creates at once over u1.
	s := newReview40adRacyStore()
	s.between = review40adBarrier(2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []string{"plan-a", "plan-b"} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Create(ctx, mk(id, "u1")) }()
	}
	wg.Wait()
	s.between = nil
	all, _ := s.List(ctx)
	var holders []string
	for _, p := range all {
		if p.Unfinished() && !p.DryRun {
			holders = append(holders, p.UUID)
		}
	}
	if len(holders) < 2 {
		t.Fatalf("setup: the racy store did not let both Creates land: %v %v", errs, holders)
	}

	// Ground truth 2: two Puts with one version (an operator's cancel and
	// an executor's pass), both accepted.
	s2 := newReview40adRacyStore()
	if err := s2.Create(ctx, mk("plan-c", "u2")); err != nil {
		t.Fatal(err)
	}
	read, _ := s2.Get(ctx, "plan-c")
	cancelled, err := plan.Cancel(read.Clone())
	if err != nil {
		t.Fatal(err)
	}
	cancelled.Version = read.Version
	pass := read.Clone()
	pass.Reboots[0].Error = "pass"
	pass.Version = read.Version
	s2.between = review40adBarrier(2)
	perr := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); perr[0] = s2.Put(ctx, cancelled) }()
	go func() { defer wg.Done(); perr[1] = s2.Put(ctx, pass) }()
	wg.Wait()
	s2.between = nil
	if perr[0] != nil || perr[1] != nil {
		t.Fatalf("setup: one Put was refused: %v", perr)
	}
	t.Logf("ground truth: Creates of two plans over u1 at once: %v, both unfinished: %v; two Puts with version %s at once: both accepted (%v)",
		errs, holders, read.Version, perr)

	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		plantest.StoreContract(r, func() (plantest.Stores, error) { return plantest.Stores{Store: newReview40adRacyStore()}, nil })
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatalf("StoreContract passed a store whose compare-and-swap and ErrServerInPlan check are not atomic with its write (ground truth: two concurrent Creates both made %v unfinished over u1; two concurrent Puts with one version both accepted): the kit never calls the store from two writers at once", holders)
	}
	t.Logf("caught: %v", r.failed)
}
