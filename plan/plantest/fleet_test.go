package plantest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// toyFleet is a small ViewFleet whose jobs finish 30 s after creation,
// with the faults a Fleet of one's own can have.
type toyFleet struct {
	now  time.Duration
	jobs map[string]time.Duration // job UUID -> creation
	// recreate: CreateJob starts a job again; forget: a plan that is not
	// running sees no job; whole: ObserveView observes everything.
	recreate, forget, whole bool
}

func (f *toyFleet) Observe(_ context.Context, p plan.Plan) (plan.Observations, error) {
	o := plan.Observations{Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}}
	for _, r := range p.Reboots {
		o.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
	}
	if f.forget && p.State != plan.StateRunning {
		return o, nil
	}
	for id, c := range f.jobs {
		o.Jobs[id] = plan.JobObs{Exists: true, Started: true, Drained: true, Finished: f.now-c >= 30*time.Second}
	}
	return o, nil
}

func (f *toyFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	if f.whole {
		return f.Observe(ctx, v.Plan)
	}
	o := plan.Observations{Partial: true, Servers: map[string]plan.ServerObs{}, Jobs: map[string]plan.JobObs{}}
	for _, r := range v.Reboots {
		o.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
		if c, ok := f.jobs[r.JobUUID]; ok {
			o.Jobs[r.JobUUID] = plan.JobObs{Exists: true, Started: true, Drained: true, Finished: f.now-c >= 30*time.Second}
		}
	}
	return o, nil
}

func (f *toyFleet) CreateJob(_ context.Context, a plan.Action) error {
	if _, ok := f.jobs[a.JobUUID]; !ok || f.recreate {
		f.jobs[a.JobUUID] = f.now
	}
	return nil
}

func (f *toyFleet) CancelJob(context.Context, plan.Action) error { return nil }

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recorder) Helper()                   {}

// TestFleetContractCatches (issue 40, point 4): the Fleet contract fails
// a fleet that starts a job again on CreateJob, one that forgets jobs when
// their plan ends, and one whose ObserveView is not partial; it passes the
// honest toy fleet.
func TestFleetContractCatches(t *testing.T) {
	run := func(f *toyFleet) []string {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			plantest.FleetContract(r, func() (plantest.Fleet, error) {
				f.jobs = map[string]time.Duration{}
				return plantest.Fleet{Fleet: f, Servers: []plan.Server{{UUID: "a", Hostname: "a", Platform: "1"},
					{UUID: "b", Hostname: "b", Platform: "1"}}, Advance: func(d time.Duration) { f.now += d }}, nil
			})
		}()
		<-done
		return r.failed
	}
	if f := run(&toyFleet{}); len(f) != 0 {
		t.Errorf("the honest toy fleet failed: %v", f)
	}
	for name, bad := range map[string]*toyFleet{"recreate": {recreate: true}, "forget": {forget: true}, "whole": {whole: true}} {
		if f := run(bad); len(f) == 0 {
			t.Errorf("a fleet with fault %s passed the contract", name)
		} else {
			t.Logf("%s caught: %v", name, f)
		}
	}
}
