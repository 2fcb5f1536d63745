package plan_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// sideStore is a plan.CommandStore: operators' commands land in a queue
// next to the store and are applied by its next read (as rebootctl's
// FILE.commands). It shows the executor the plain Store methods only, so
// the executor reads the state again through Get.
type sideStore struct {
	inner *fake.PlanStore
	mu    sync.Mutex
	queue []func(plan.Plan) (plan.Plan, error)
	asked int // CommandPending calls
}

func (s *sideStore) land(f func(plan.Plan) (plan.Plan, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, f)
}

func (s *sideStore) apply(ctx context.Context, uuid string) error {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, f := range q {
		if _, err := plan.Command(ctx, s.inner, uuid, f); err != nil {
			return err
		}
	}
	return nil
}

func (s *sideStore) Get(ctx context.Context, uuid string) (plan.Plan, error) {
	if err := s.apply(ctx, uuid); err != nil {
		return plan.Plan{}, err
	}
	return s.inner.Get(ctx, uuid)
}
func (s *sideStore) Create(ctx context.Context, p plan.Plan) error { return s.inner.Create(ctx, p) }
func (s *sideStore) Put(ctx context.Context, p plan.Plan) error    { return s.inner.Put(ctx, p) }
func (s *sideStore) List(ctx context.Context) ([]plan.Plan, error) { return s.inner.List(ctx) }

func (s *sideStore) CommandPending(_ context.Context, _ string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	return len(s.queue) > 0, nil
}

// landingFleet lands a stop while it creates its second job, and counts
// the job creations that began after it landed.
type landingFleet struct {
	*fake.Fleet
	store   *sideStore
	calls   int
	landed  bool
	started int
}

func (f *landingFleet) CreateJob(ctx context.Context, a plan.Action) error {
	f.calls++
	if f.landed {
		f.started++
	}
	if f.calls == 2 {
		f.store.land(plan.Stop)
		f.landed = true
	}
	return f.Fleet.CreateJob(ctx, a)
}

// TestExecutor_CommandStoreLooksBeforeEveryJob (issue 37, review round 17,
// point 2): on a plan.CommandStore a stop that lands while the pass
// creates a job is followed by no other job creation of that pass (before
// this, up to 15 more: the state was read again every 16 jobs only).
// Ground truth: the fleet's job creations and the stored plan's state.
func TestExecutor_CommandStoreLooksBeforeEveryJob(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(32)
	w := newWorld(t, fleetServers(0, 32, time.Minute), "", o)
	s := &sideStore{inner: w.store}
	f := &landingFleet{Fleet: w.fleet, store: s}
	ex := &plan.Executor{Fleet: f, Store: s, Now: w.clk.Now}
	_, err := ex.Pass(w.ctx, o.UUID)
	require.NoError(t, err)
	assert.Equal(t, 2, f.calls, "jobs created: the one in flight as the stop landed is the last")
	assert.Zero(t, f.started, "job creations begun after the stop had landed")
	assert.Len(t, w.fleet.JobsCreated(), 2)
	p, err := w.store.Get(w.ctx, o.UUID)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, p.State)
	assert.GreaterOrEqual(t, s.asked, 1, "the executor asked the CommandStore")
}
