package plantest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// review40agSickWhileFrozen is a ShardFleet (freeze, unfreeze and the
// primary all reported) whose Observe reports the shard healthy only
// while it is not frozen (a fleet of one's own that computes "healthy"
// as "writable": a frozen shard refuses writes). The Executor unfreezes
// only a healthy shard (plan/next.go StepUnfreeze), so after the
// primary's reboot the shard is never unfrozen: the reboot fails
// "database shard not healthy ...; left frozen", and the shard stays
// frozen after the plan has ended.
type review40agSickWhileFrozen struct{ *fake.Fleet }

func (f review40agSickWhileFrozen) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	o, err := f.Fleet.Observe(ctx, p)
	if o.ShardFrozen {
		o.ShardHealthy = false
	}
	return o, err
}

func (f review40agSickWhileFrozen) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	if o.ShardFrozen {
		o.ShardHealthy = false
	}
	return o, err
}

// review40agRunToEnd runs a plan over s1 (the primary) and s2 to its end
// with the Executor on a fake clock over wrap(fleet), and returns the
// fake fleet's own ground truth: the shard frozen at the end, the number
// of freezes, and the plan's end state.
func review40agRunToEnd(t *testing.T, wrap func(*fake.Fleet) plan.Fleet) (frozen bool, freezes int, end plan.Plan) {
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
	for i := 0; i < 5000; i++ {
		v, _ := e.Pass(ctx, "plan-shard")
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	if end, err = store.Get(ctx, "plan-shard"); err != nil {
		t.Fatal(err)
	}
	if end.Unfinished() {
		end.UUID = ""
	}
	frozen, freezes = f.Frozen()
	return frozen, freezes, end
}

// TestReview40ag_FleetContractPassesShardUnhealthyWhileFrozen:
// FleetContract checks that a ShardFleet reports its shard healthy
// ("ShardHealthy: the Executor unfreezes only a healthy shard"), but only
// before the freeze; after FreezeShard it checks ShardFrozen alone, and
// its run of the Executor over the primary (checkShardPrimary) lets the
// plan end without looking at how it ended or whether the shard was
// unfrozen. A fleet that reports the shard unhealthy while frozen passes
// the kit, and every primary's reboot then fails and leaves the database
// shard frozen for good after its plan ended (ground truth: the fake
// fleet's own frozen flag), where the same fleet reporting health
// honestly ends unfrozen.
func TestReview40ag_FleetContractPassesShardUnhealthyWhileFrozen(t *testing.T) {
	hFrozen, hFreezes, hEnd := review40agRunToEnd(t, func(f *fake.Fleet) plan.Fleet { return f })
	sFrozen, sFreezes, sEnd := review40agRunToEnd(t, func(f *fake.Fleet) plan.Fleet { return review40agSickWhileFrozen{f} })
	if hFreezes == 0 || hFrozen || hEnd.UUID == "" || sFreezes == 0 || sEnd.UUID == "" {
		t.Fatalf("setup: honest fleet: %d freezes, frozen at end %v, plan ended %q; sick-while-frozen fleet: %d freezes, plan ended %q",
			hFreezes, hFrozen, hEnd.State, sFreezes, sEnd.State)
	}
	t.Logf("ground truth: honest fleet ends %s, shard frozen %v; fleet unhealthy while frozen ends %s, shard frozen %v (reboot of s1: %q)",
		hEnd.State, hFrozen, sEnd.State, sFrozen, sEnd.Reboots[0].Error)
	if !sFrozen {
		t.Fatalf("setup: the fleet reporting the shard unhealthy while frozen ended unfrozen")
	}
	failed := review40abRun(t, review40abFleet("s1", nil, func(f *fake.Fleet) plan.Fleet { return review40agSickWhileFrozen{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a plan.ShardFleet that reports its shard unhealthy while frozen: the Executor never unfreezes it, and the shard stays frozen after the plan ended (ground truth: fake fleet frozen=%v after plan %s)", sFrozen, sEnd.State)
	}
	t.Logf("caught: %v", failed)
}

// review40agPrimaryInFullViewsOnly is a ViewFleet and ShardFleet whose
// Observe reports the shard's primary, and whose ObserveView reports it
// only for a view of the whole plan (View.Full): a partial view, the one
// the Executor observes each pass when its store is a plan.ViewStore
// (BoltStore, etcd.Store), leaves Observations.ShardPrimary empty.
type review40agPrimaryInFullViewsOnly struct{ *fake.Fleet }

func (f review40agPrimaryInFullViewsOnly) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	if !v.Full() {
		o.ShardPrimary = ""
	}
	return o, err
}

// TestReview40ag_FleetContractChecksShardPrimaryInFullViewsOnly: the
// kit's doc says that, when the caller names the shard's primary, "the
// fleet reports it (Observations.ShardPrimary) and the Executor freezes
// the shard before that server's job", and ViewFleet's doc that
// ObserveView observes "the headnode and the shard ... as Observe does".
// checkShardPrimary asks ObserveView only of a full view (plan.FullView),
// and runs the Executor over a plan.FileStore, which is not a ViewStore,
// so the Executor there calls Observe, never ObserveView. A ViewFleet that
// drops ShardPrimary from partial views passes the kit; under the
// Executor on a BoltStore (a ViewStore: a partial view each pass) the
// primary s1 is rebooted without the shard ever being frozen (ground
// truth: the fake fleet's own freeze and reboot counts).
func TestReview40ag_FleetContractChecksShardPrimaryInFullViewsOnly(t *testing.T) {
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
	store, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	e := &plan.Executor{Fleet: review40agPrimaryInFullViewsOnly{f}, Store: store, Now: clk.Now}
	for i := 0; i < 2000; i++ {
		v, _ := e.Pass(ctx, "plan-shard")
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	_, freezes := f.Frozen()
	rebootsS1 := f.Reboots()["s1"]
	t.Logf("ground truth, Executor on a BoltStore over the fleet: primary s1 rebooted %d time(s), shard frozen %d time(s)", rebootsS1, freezes)
	if rebootsS1 == 0 || freezes != 0 {
		t.Fatalf("setup: want the primary rebooted without a freeze; s1 rebooted %d time(s), %d freeze(s)", rebootsS1, freezes)
	}
	failed := review40abRun(t, review40abFleet("s1", nil, func(f *fake.Fleet) plan.Fleet { return review40agPrimaryInFullViewsOnly{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a ViewFleet whose ObserveView of a partial view omits ShardPrimary: the Executor on a ViewStore reboots the primary s1 (%d time(s)) with %d freezes", rebootsS1, freezes)
	}
	t.Logf("caught: %v", failed)
}

// review40agHeadnodeInFullViewsOnly is a ViewFleet with a headnode
// (HasHeadnode true) whose ObserveView reports HeadnodeServicesUp only for
// a view of the whole plan: issue 40 point 1's zero value, on the partial
// views the Executor observes when its store is a plan.ViewStore.
type review40agHeadnodeInFullViewsOnly struct{ *fake.Fleet }

func (f review40agHeadnodeInFullViewsOnly) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	if !v.Full() {
		o.HeadnodeServicesUp = false
	}
	return o, err
}

// TestReview40ag_FleetContractChecksHeadnodeInFullViewsOnly: FleetContract
// checks "if the fleet is a plan.HeadnodeFleet whose HasHeadnode is true,
// Observe (and ObserveView) of the healthy fleet reports
// HeadnodeServicesUp", but asks ObserveView only of a full view
// (observeAll: plan.FullView), never of the partial view the Executor
// observes on a ViewStore. A ViewFleet that leaves the field false in
// partial views passes the kit, and on a BoltStore every reboot waits in
// wait_headnode for ServicesTimeout and fails: issue 40 point 1's
// hour-long stall (ground truth: the fake fleet reboots nobody, and the
// plan's reboots fail).
func TestReview40ag_FleetContractChecksHeadnodeInFullViewsOnly(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var servers []fake.FleetServer
	for _, id := range []string{"s1", "s2"} {
		servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
			Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
	}
	head := fake.FleetServer{UUID: "hn", Hostname: "headnode", Platform: "1", Core: true, Headnode: true,
		Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second}
	f := fake.NewFleet(clk.Now, "", append(servers, head)...)
	var mine []plan.Server
	for _, s := range f.Servers() {
		if s.UUID == "s1" || s.UUID == "s2" {
			mine = append(mine, s)
		}
	}
	p, _, err := plan.Create(mine, plan.CreateOptions{UUID: "plan-head", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatal(err)
	}
	store, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	e := &plan.Executor{Fleet: review40agHeadnodeInFullViewsOnly{f}, Store: store, Now: clk.Now}
	for i := 0; i < 2000; i++ {
		v, _ := e.Pass(ctx, "plan-head")
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	end, err := store.Get(ctx, "plan-head")
	if err != nil {
		t.Fatal(err)
	}
	reboots := f.Reboots()
	t.Logf("ground truth, Executor on a BoltStore over the fleet: plan %s after %s, s1 rebooted %d, s2 rebooted %d; s1: %q",
		end.State, clk.Now().Sub(*p.CreatedAt), reboots["s1"], reboots["s2"], end.Reboots[0].Error)
	if reboots["s1"]+reboots["s2"] == 2 {
		t.Fatalf("setup: both servers rebooted: the fleet does not stall")
	}
	failed := review40abRun(t, review40abFleet("", []fake.FleetServer{head}, func(f *fake.Fleet) plan.Fleet { return review40agHeadnodeInFullViewsOnly{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a HeadnodeFleet whose ObserveView of a partial view leaves HeadnodeServicesUp false: on a ViewStore its plan ends %s with s1 rebooted %d and s2 %d time(s) (issue 40 point 1)", end.State, reboots["s1"], reboots["s2"])
	}
	t.Logf("caught: %v", failed)
}

// review40agNoServersInPartialViews is a ViewFleet whose ObserveView of a
// partial view observes no server at all (Observations.Servers empty):
// "no server outside the view", but not the view's own either.
type review40agNoServersInPartialViews struct{ *fake.Fleet }

func (f review40agNoServersInPartialViews) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	o, err := f.Fleet.ObserveView(ctx, v)
	if !v.Full() {
		o.Servers = map[string]plan.ServerObs{}
	}
	return o, err
}

// TestReview40ag_FleetContractPassesPartialViewWithoutItsServer:
// FleetContract's ViewFleet check asks ObserveView of a view holding one
// reboot only that it sets Partial and observes nothing outside the view;
// it never checks that the view's own server is observed (the doc's
// "Observe (and ObserveView) of the healthy fleet reports every server of
// the plan in Observations.Servers ... a server missing counts as
// offline" is checked on a full view only). A ViewFleet that observes no
// server in a partial view passes, and on a BoltStore no job ever starts:
// three hours on, nobody rebooted, the plan still running (ground truth:
// the fake fleet's reboot counts).
func TestReview40ag_FleetContractPassesPartialViewWithoutItsServer(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var servers []fake.FleetServer
	for _, id := range []string{"s1", "s2"} {
		servers = append(servers, fake.FleetServer{UUID: id, Hostname: "host-" + id, Platform: "1",
			Queue: time.Second, Drain: 5 * time.Second, Shutdown: 10 * time.Second, Boot: time.Minute, Services: 30 * time.Second})
	}
	f := fake.NewFleet(clk.Now, "", servers...)
	p, _, err := plan.Create(f.Servers(), plan.CreateOptions{UUID: "plan-view", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatal(err)
	}
	store, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	e := &plan.Executor{Fleet: review40agNoServersInPartialViews{f}, Store: store, Now: clk.Now}
	var last plan.View
	for i := 0; i < 3*720; i++ {
		v, _ := e.Pass(ctx, "plan-view")
		last = v
		if !v.Unfinished() && v.UUID != "" {
			break
		}
		clk.Advance(5 * time.Second)
	}
	reboots := f.Reboots()
	t.Logf("ground truth, Executor on a BoltStore over the fleet, after %s: s1 rebooted %d, s2 rebooted %d; plan unfinished %v, waiting %q",
		clk.Now().Sub(*p.CreatedAt), reboots["s1"], reboots["s2"], last.Unfinished(), last.Waiting)
	if reboots["s1"]+reboots["s2"] == 2 {
		t.Fatalf("setup: both servers rebooted: the fleet does not stall")
	}
	failed := review40abRun(t, review40abFleet("", nil, func(f *fake.Fleet) plan.Fleet { return review40agNoServersInPartialViews{f} }))
	if len(failed) == 0 {
		t.Fatalf("FleetContract passed a ViewFleet whose ObserveView of a partial view observes not even the view's server: on a ViewStore, after %s, s1 rebooted %d and s2 %d time(s)", clk.Now().Sub(*p.CreatedAt), reboots["s1"], reboots["s2"])
	}
	t.Logf("caught: %v", failed)
}
