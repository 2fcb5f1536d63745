package plantest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/plan/plantest"
)

// review40abFleet builds a fake.Fleet of three servers (s1, s2, s3) plus
// the extra ones given, on a fake clock, and the plantest.Fleet of it
// with wrap applied; servers[:2] are s1 and s2.
func review40abFleet(shard string, extra []fake.FleetServer, wrap func(*fake.Fleet) plan.Fleet) func() (plantest.Fleet, error) {
	return func() (plantest.Fleet, error) {
		clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var servers []fake.FleetServer
		for _, id := range []string{"s1", "s2", "s3"} {
			servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
				Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
		}
		servers = append(servers, extra...)
		f := fake.NewFleet(clk.Now, shard, servers...)
		var mine []plan.Server
		for _, s := range f.Servers() {
			if s.UUID == "s1" || s.UUID == "s2" {
				mine = append(mine, s)
			}
		}
		return plantest.Fleet{Fleet: wrap(f), Servers: mine, Advance: func(d time.Duration) { clk.Advance(d) }, ShardPrimary: shard}, nil
	}
}

func review40abRun(t *testing.T, newFleet plantest.NewFleet) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); plantest.FleetContract(r, newFleet) }()
	<-done
	return r.failed
}

// silentHeadnode is a HeadnodeFleet (it has a headnode) whose Observe
// never sets HeadnodeServicesUp: the zero value issue 40, point 1 is
// about, now behind HasHeadnode.
type silentHeadnode struct{ *fake.Fleet }

func (f silentHeadnode) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	o.HeadnodeServicesUp = false
	return o, err
}

func (f silentHeadnode) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	o.HeadnodeServicesUp = false
	return o, err
}

// TestReview40ab_FleetContractPassesSilentHeadnode: issue 40, point 1: a
// Fleet of one's own that leaves Observations.HeadnodeServicesUp false
// parks every reboot in wait_headnode until ServicesTimeout (an hour) and
// fails the plan with "headnode services not up". The headnode became an
// optional ability (HeadnodeFleet), but a fleet that has one
// (HasHeadnode true) and forgets the field stalls exactly as before, and
// the published kit (FleetContract: "checks a plan.Fleet's job contract
// ... as the Executor sees it") passes it: it never looks at the
// headnode, although its fleet is healthy and up by its own contract
// ("Servers ... up, whose reboot jobs succeed"). The same fleet, with the
// field set (fake.Fleet), reports it up: the kit could tell them apart.
func TestReview40ab_FleetContractPassesSilentHeadnode(t *testing.T) {
	head := []fake.FleetServer{{UUID: "hn", Hostname: "headnode", Platform: "1", Core: true, Headnode: true,
		Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second}}
	newFleet := review40abFleet("", head, func(f *fake.Fleet) plan.Fleet { return silentHeadnode{f} })
	// The ground truth: the fleet has a headnode, up, services up (the
	// honest fake reports it so).
	honest, _ := review40abFleet("", head, func(f *fake.Fleet) plan.Fleet { return f })()
	if !honest.Fleet.(plan.HeadnodeFleet).HasHeadnode() {
		t.Fatal("setup: the fake has no headnode")
	}
	p, _, err := plan.Create(honest.Servers, plan.CreateOptions{UUID: "x", Target: "t", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(1), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := honest.Fleet.Observe(context.Background(), p); err != nil || !o.HeadnodeServicesUp {
		t.Fatalf("setup: the honest fake does not report its headnode up: %v %v", o.HeadnodeServicesUp, err)
	}
	if f := review40abRun(t, newFleet); len(f) == 0 {
		t.Fatal("FleetContract passed a HeadnodeFleet (HasHeadnode true) whose Observe never reports HeadnodeServicesUp, on a healthy fleet: every reboot of a plan on it waits in wait_headnode for ServicesTimeout (1 h) and fails (issue 40, point 1)")
	} else {
		t.Logf("caught: %v", f)
	}
}

// forgetfulCancel is a Fleet whose CancelJob drops the job's record at
// once (Observe no longer shows it), while the fleet's job goes on: a job
// that already sent its reboot command "reboots the server all the same".
type forgetfulCancel struct {
	*fake.Fleet
	mu   sync.Mutex
	gone map[string]bool
}

func (f *forgetfulCancel) CancelJob(ctx context.Context, a plan.Action) error {
	f.mu.Lock()
	f.gone[a.JobUUID] = true
	f.mu.Unlock()
	return f.Fleet.CancelJob(ctx, a)
}

func (f *forgetfulCancel) hide(o plan.Observations) plan.Observations {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.gone {
		delete(o.Jobs, id)
	}
	return o
}

func (f *forgetfulCancel) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	return f.hide(o), err
}

func (f *forgetfulCancel) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	return f.hide(o), err
}

// TestReview40ab_FleetContractNeverCancels: plan.Fleet's contract says
// the fleet keeps every job it created, finished or not, for RetainJobs,
// and that the executor counts a cancelled job's server offline "until
// Observe reports the job ended" (a job that already sent its reboot
// command reboots the server all the same). A fleet whose CancelJob
// forgets the job at once makes the executor take the cancelled reboot as
// over (StepCancelJob: !Exists -> failed, no longer in flight) while the
// job may still be under way: its server then counts offline only while
// the fleet happens to read it down. FleetContract never calls CancelJob
// (nor looks at a job after a cancel), so it passes such a fleet.
func TestReview40ab_FleetContractNeverCancels(t *testing.T) {
	newFleet := review40abFleet("", nil, func(f *fake.Fleet) plan.Fleet { return &forgetfulCancel{Fleet: f, gone: map[string]bool{}} })
	if f := review40abRun(t, newFleet); len(f) == 0 {
		t.Fatal("FleetContract passed a fleet whose CancelJob drops the job's record at once (Observe shows no job while it may still reboot the server): the kit never cancels a job")
	} else {
		t.Logf("caught: %v", f)
	}
}

// stuckShard is a ShardFleet whose UnfreezeShard answers nil and does
// nothing: the shard stays frozen.
type stuckShard struct{ *fake.Fleet }

func (stuckShard) UnfreezeShard(context.Context) error { return nil }

// TestReview40ab_FleetContractIgnoresShard: the shard freeze is one of the
// Fleet's optional abilities (ShardFleet: "FreezeShard and UnfreezeShard
// freeze and unfreeze the database shard; both are idempotent"). A
// ShardFleet whose UnfreezeShard does nothing leaves the database shard
// frozen for good after the primary's reboot (the executor asks again
// each pass; the plan never completes). FleetContract never freezes or
// unfreezes, so it passes such a fleet.
func TestReview40ab_FleetContractIgnoresShard(t *testing.T) {
	newFleet := review40abFleet("s1", nil, func(f *fake.Fleet) plan.Fleet { return stuckShard{f} })
	if f := review40abRun(t, newFleet); len(f) == 0 {
		t.Fatal("FleetContract passed a ShardFleet whose UnfreezeShard leaves the shard frozen (Observe keeps reporting ShardFrozen): the kit never checks the shard ability")
	} else {
		t.Logf("caught: %v", f)
	}
}
