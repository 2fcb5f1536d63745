package etcd

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

// slowCreate is the fake fleet whose job creation takes its time (an API
// call that answers in 400 ms, well within CallTimeout), and an operator
// who stops the plan, through a store of its own, while the first job is
// being created.
type slowCreate struct {
	*fake.Fleet
	stop     func()
	mu       sync.Mutex
	calls    int
	stopped  time.Time
	lastLate time.Duration
	late     int
}

func (f *slowCreate) CreateJob(ctx context.Context, a plan.Action) error {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	if !f.stopped.IsZero() {
		f.late++
		f.lastLate = time.Since(f.stopped)
	}
	f.mu.Unlock()
	time.Sleep(400 * time.Millisecond)
	err := f.Fleet.CreateJob(ctx, a)
	if first {
		f.stop()
		f.mu.Lock()
		f.stopped = time.Now()
		f.mu.Unlock()
	}
	return err
}

// TestReview37r_StopTakesEffectAfter15SlowJobs: the etcd Store is not a
// plan.CommandStore, so a pass reads the plan's state again only before
// every 16 jobs (plan.Executor.Pass, recheckEvery): a stop that has
// landed (its header compare-and-swap written, the operator told
// "stopped") is followed by up to 15 more job creations, and the bound is
// in jobs, not in time: each may take up to CallTimeout (30 s by
// default), so a stop takes effect up to 7.5 minutes after it landed.
// Here each creation takes 400 ms and the last job is created 6 s after
// the stop landed. The store could answer CommandPending from its known
// header (the header key's ModRevision compared in etcd, as GetState
// does) before every job once a pass has created one. Ground truth: the
// wall time of the job creations the fleet was asked for after the stop
// returned.
func TestReview37r_StopTakesEffectAfter15SlowJobs(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	fl := fleetOf(clk, "s", 20, "")
	p := runningPlan(t, "s", fl.Servers(), 20, clk.Now())
	st := NewStore(newClient(t), pre)
	require.NoError(t, st.Create(ctx, p))
	ops := NewStore(newClient(t), pre) // the operator's process
	f := &slowCreate{Fleet: fl, stop: func() {
		v, err := plan.Command(ctx, ops, "s", plan.Stop)
		require.NoError(t, err)
		require.Equal(t, plan.StateStopped, v.State)
	}}
	ex := &plan.Executor{Fleet: f, Store: st, Now: clk.Now}
	_, _ = ex.Pass(ctx, "s")
	require.False(t, f.stopped.IsZero(), "the stop was given")
	t.Logf("%d job(s) created after the stop landed, the last %s after it", f.late, f.lastLate.Round(time.Millisecond))
	assert.Less(t, f.lastLate, time.Second, "a job was created %s after the operator's stop landed (%d after it)", f.lastLate.Round(time.Millisecond), f.late)
}
