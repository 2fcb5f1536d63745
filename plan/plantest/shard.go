package plantest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// checkShardPrimary checks, for a Fleet whose caller names the shard's
// primary (Fleet.ShardPrimary), that the fleet is a plan.ShardFleet, that
// Observe (and ObserveView, of full and partial views) of the fresh fleet
// (FleetContract calls it before its own jobs) report that primary in
// Observations.ShardPrimary (the field the Executor decides the
// freeze on), and that the Executor, running a plan over the first two
// Servers (over plan.Views of a FileStore for a plan.ViewFleet, so that it
// observes partial views as it does in production), calls FreezeShard
// before it creates the primary's job (ground truth: the calls the fleet
// received, recorded by the kit, not what the fleet reports), and that
// the plan then ends as checkShardEnd says. An empty Fleet.ShardPrimary checks nothing: the fleet has no
// shard among its Servers.
func checkShardPrimary(ctx context.Context, t testing.TB, f Fleet, at time.Time) {
	t.Helper()
	if f.ShardPrimary == "" {
		return
	}
	sf, ok := f.Fleet.(plan.ShardFleet)
	if !ok {
		t.Errorf("plantest: Fleet.ShardPrimary is %s, but the fleet is not a plan.ShardFleet: the Executor never freezes a shard (implement FreezeShard and UnfreezeShard, or leave ShardPrimary empty)", f.ShardPrimary)
		return
	}
	if !slices.ContainsFunc(f.Servers[:2], func(s plan.Server) bool { return s.UUID == f.ShardPrimary }) {
		t.Fatalf("plantest: Fleet.ShardPrimary %s is not one of the first two Servers", f.ShardPrimary)
	}
	p, _, err := plan.Create(f.Servers[:2], plan.CreateOptions{UUID: "plantest-shard", Target: "plantest-target", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: at})
	if err != nil {
		t.Fatalf("plantest: create plan: %v", err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatalf("plantest: run plan: %v", err)
	}
	reported := true
	for _, ob := range observeAll(ctx, t, f.Fleet, p, "the shard's primary") {
		if ob.o.ShardPrimary != f.ShardPrimary {
			reported = false
			t.Errorf("%s of the fresh plan.ShardFleet (before the kit rebooted any server) reports ShardPrimary %q, but Fleet.ShardPrimary names %s as its shard's primary: the Executor decides the freeze on that field, and would reboot %s without freezing the shard",
				ob.way, ob.o.ShardPrimary, f.ShardPrimary, f.ShardPrimary)
		}
	}
	var store plan.Store = plan.FileStore{Dir: t.TempDir()}
	if err := store.Create(ctx, p); err != nil {
		t.Fatalf("plantest: store the plan: %v", err)
	}
	rec := &shardRecorder{Fleet: f.Fleet, shard: sf}
	var fleet plan.Fleet = rec
	if vf, ok := f.Fleet.(plan.ViewFleet); ok {
		// As in production on a ViewStore: the Executor observes partial
		// views.
		store, fleet = plan.Views(store), shardViewRecorder{rec, vf}
	}
	now := at
	// The Executor's bounds are the kit's own: a job drains and finishes
	// within an hour (FleetContract's doc), where the default DrainTimeout
	// is 15 minutes.
	e := &plan.Executor{Fleet: fleet, Store: store, Now: func() time.Time { return now },
		Config: plan.Config{DrainTimeout: shardJobBound, JobTimeout: shardJobBound}}
	primaryJob := -1
	for i := 0; i < 720 && primaryJob < 0; i++ {
		if _, err := e.Pass(ctx, p.UUID); err != nil {
			t.Logf("plantest: executor pass over the shard's plan: %v", err)
		}
		primaryJob = rec.index("create-job " + f.ShardPrimary)
		f.Advance(10 * time.Second)
		now = now.Add(10 * time.Second)
	}
	calls := rec.list()
	switch freeze := rec.index("freeze"); {
	case primaryJob < 0 && reported:
		t.Errorf("in two hours of fleet time the Executor never created the job of the shard's primary %s (fleet calls: %v)", f.ShardPrimary, calls)
	case primaryJob >= 0 && (freeze < 0 || freeze > primaryJob):
		t.Errorf("the Executor created the job of the shard's primary %s without freezing the shard first (fleet calls, in order: %v): Observe reports ShardPrimary %q",
			f.ShardPrimary, calls, observeAll(ctx, t, f.Fleet, p, "the shard's primary")[0].o.ShardPrimary)
	}
	if primaryJob < 0 {
		return
	}
	// Let the plan end, so that the shard is unfrozen; then check how it
	// ended.
	for i := 0; i < 720; i++ {
		v, _ := e.Pass(ctx, p.UUID)
		if v.UUID != "" && !v.Unfinished() {
			break
		}
		f.Advance(10 * time.Second)
		now = now.Add(10 * time.Second)
	}
	checkShardEnd(ctx, t, f, store, p.UUID, rec)
}

// shardJobBound is the DrainTimeout and JobTimeout of the kit's Executor:
// the hour within which FleetContract asks a fleet's jobs to finish.
const shardJobBound = time.Hour

// checkShardEnd checks how the plan over the shard's primary ended: done
// (not failed) within two hours, the primary's reboot done, and the shard
// unfrozen (ground truth: the last freeze or unfreeze call the fleet
// received being an unfreeze, and the fleet's own Observe and ObserveView
// reporting it not frozen within a minute of fleet time, as checkShard
// allows).
func checkShardEnd(ctx context.Context, t testing.TB, f Fleet, store plan.Store, uuid string, rec *shardRecorder) {
	t.Helper()
	end, err := store.Get(ctx, uuid)
	if err != nil {
		t.Fatalf("plantest: read the shard's plan: %v", err)
	}
	calls := rec.list()
	if end.Unfinished() {
		t.Errorf("two hours after the shard's primary %s was rebooted, its plan has not ended (state %s; fleet calls: %v): a shard left frozen keeps its primary's reboot failed_unfreeze",
			f.ShardPrimary, end.State, calls)
	}
	for _, r := range end.Reboots {
		if r.ServerUUID != f.ShardPrimary || r.Step == plan.StepDone {
			continue
		}
		why := "the Executor failed it (its error says why; the kit's Executor allows the job an hour to drain and to finish)"
		if r.Step == plan.StepFailFreeze {
			why = "the Executor could not unfreeze the shard after it (a fleet that reports its shard unhealthy, or still frozen, for Config.ServicesTimeout after the primary's services came up)"
		}
		t.Errorf("the reboot of the shard's primary %s ended %s (%q), want done (fleet calls: %v): %s",
			r.ServerUUID, r.Step, r.Error, calls, why)
	}
	last := ""
	for _, c := range calls {
		if c == "freeze" || c == "unfreeze" {
			last = c
		}
	}
	if last != "unfreeze" {
		t.Errorf("after the plan over the shard's primary %s, the last shard call the fleet received is %q, want unfreeze (fleet calls: %v): the shard stays frozen after its plan ended",
			f.ShardPrimary, last, calls)
	}
	// As checkShard: every way of observing has a minute of fleet time to
	// report the unfreeze.
	var got []observed
	var waited time.Duration
	for ; ; waited += 10 * time.Second {
		got = observeAll(ctx, t, f.Fleet, end, "the shard, after its primary's plan")
		thawed := true
		for _, ob := range got {
			thawed = thawed && !ob.o.ShardFrozen
		}
		if thawed || waited >= time.Minute {
			break
		}
		f.Advance(10 * time.Second)
	}
	for _, ob := range got {
		if ob.o.ShardFrozen {
			t.Errorf("%v after the plan over the shard's primary %s ended (%s), %s still reports the shard frozen (ShardFrozen): the shard stays frozen after its plan ended",
				waited, f.ShardPrimary, end.State, ob.way)
		}
	}
}

// shardRecorder is the fleet under test, as a plan.ShardFleet, recording
// the calls the Executor makes to it, in order.
type shardRecorder struct {
	plan.Fleet
	shard plan.ShardFleet
	mu    sync.Mutex
	calls []string
}

func (r *shardRecorder) add(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

// index returns the position of the first call named call, or -1.
func (r *shardRecorder) index(call string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Index(r.calls, call)
}

func (r *shardRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// HasHeadnode is the fleet's, so that the Executor waits for the headnode
// as it does over the fleet itself.
func (r *shardRecorder) HasHeadnode() bool {
	hf, ok := r.Fleet.(plan.HeadnodeFleet)
	return ok && hf.HasHeadnode()
}

// shardViewRecorder is a shardRecorder of a plan.ViewFleet, itself a
// plan.ViewFleet.
type shardViewRecorder struct {
	*shardRecorder
	view plan.ViewFleet
}

func (r shardViewRecorder) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	return r.view.ObserveView(ctx, v)
}

func (r *shardRecorder) CreateJob(ctx context.Context, a plan.Action) error {
	r.add(fmt.Sprintf("create-job %s", a.Server))
	return r.Fleet.CreateJob(ctx, a)
}

func (r *shardRecorder) FreezeShard(ctx context.Context) error {
	r.add("freeze")
	return r.shard.FreezeShard(ctx)
}

func (r *shardRecorder) UnfreezeShard(ctx context.Context) error {
	r.add("unfreeze")
	return r.shard.UnfreezeShard(ctx)
}
