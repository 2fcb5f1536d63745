package plan_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
}

// world is a plan running against a simulated fleet on a fake clock.
type world struct {
	t     tb
	ctx   context.Context
	clk   *fake.Clock
	fleet *fake.Fleet
	store *fake.PlanStore
	exec  *plan.Executor
	uuid  string
	// history of (time, plan) after every pass
	snaps []plan.Plan
}

func fleetServers(core, rest int, d time.Duration) []fake.FleetServer {
	var out []fake.FleetServer
	for i := 0; i < core+rest; i++ {
		s := fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: d, Services: 30 * time.Second}
		if i < core {
			s.Core, s.Hostname = true, fmt.Sprintf("core%d", i)
		}
		if i == 0 && core > 0 {
			s.Headnode, s.Hostname = true, "headnode"
		}
		out = append(out, s)
	}
	return out
}

func newWorld(t tb, fs []fake.FleetServer, primary string, o plan.CreateOptions) *world {
	w := &world{t: t, ctx: context.Background(), clk: fake.NewClock(time.Time{}), store: fake.NewPlanStore(), uuid: o.UUID}
	w.fleet = fake.NewFleet(w.clk.Now, primary, fs...)
	p, _, err := plan.Create(w.fleet.Servers(), o)
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	require.NoError(t, w.store.Create(w.ctx, p))
	w.exec = w.newExec()
	return w
}

// onViews makes newExec pass on views (plan.Views over the store, and the
// fleet's ObserveView) instead of whole plans; TestRulesOnViews sets it.
var onViews bool

func (w *world) newExec() *plan.Executor {
	var store plan.Store = w.store
	if onViews {
		store = plan.Views(w.store)
	}
	return &plan.Executor{Fleet: w.fleet, Store: store, Now: w.clk.Now}
}

// TestRulesOnViews runs the rule and regression tests again with every
// pass on a view: reading, observing and writing only the reboots in
// flight and the next pending ones must keep every rule.
func TestRulesOnViews(t *testing.T) {
	onViews = true
	defer func() { onViews = false }()
	for name, f := range map[string]func(*testing.T){
		"CoreFirstOneAtATime": TestCoreFirstOneAtATime, "SlidingWindow": TestSlidingWindow, "StopRunCancel": TestStopRunCancel,
		"FailuresAndBudget": TestFailuresAndBudget, "ShardFreeze": TestShardFreeze, "ExecutorRestartsEveryPass": TestExecutorRestartsEveryPass,
		"DryRun": TestDryRun, "SummaryAndViews": TestSummaryAndViews, "CancelNotOverwritten": TestRegressionCancelNotOverwritten,
		"OfflineHasOneMeaning": TestRegressionOfflineHasOneMeaning, "CollectedJobNotRecreated": TestRegressionCollectedJobNotRecreated,
		"DrainTimeoutOneClock": TestRegressionDrainTimeoutOneClock,
	} {
		t.Run(name, f)
	}
}

// pass runs one executor pass (tolerating the headnode's downtime).
func (w *world) pass() plan.Plan {
	_, err := w.exec.Pass(w.ctx, w.uuid)
	if err != nil && !errors.Is(err, fake.ErrUnavailable) {
		w.t.Fatalf("pass: %v", err)
	}
	p, _ := w.store.Get(w.ctx, w.uuid) // the whole plan, whatever the pass read
	w.snaps = append(w.snaps, p)
	return p
}

func (w *world) runUntilDone(tick time.Duration, max int) plan.Plan {
	var p plan.Plan
	for i := 0; i < max; i++ {
		p = w.pass()
		if !p.Unfinished() {
			return p
		}
		w.clk.Advance(tick)
	}
	w.t.Fatalf("plan not finished after %d passes: %s", max, plan.Table(p))
	return p
}

func startOrder(snaps []plan.Plan) []string {
	seen := map[string]bool{}
	var order []string
	for _, p := range snaps {
		for _, r := range p.Reboots {
			if r.Step != plan.StepPending && !seen[r.ServerHostname] {
				seen[r.ServerHostname] = true
				order = append(order, r.ServerHostname)
			}
		}
	}
	return order
}

// "if the plan includes any core servers, the reboot of these will happen
// before any others, and just one core server at time" — the headnode first.
func TestCoreFirstOneAtATime(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(4)
	w := newWorld(t, fleetServers(3, 6, time.Minute), "", o)
	final := w.runUntilDone(10*time.Second, 1000)
	assert.Equal(t, plan.StateComplete, final.State)
	order := startOrder(w.snaps)
	assert.Equal(t, []string{"headnode", "core1", "core2"}, order[:3])
	for _, p := range w.snaps {
		core, nonCoreStarted, coreLeft := 0, false, false
		for _, r := range p.Reboots {
			if r.Core && r.Step.InFlight() {
				core++
			}
			if r.Core && !r.Step.Ended() {
				coreLeft = true
			}
			if !r.Core && r.Step != plan.StepPending {
				nonCoreStarted = true
			}
		}
		require.LessOrEqual(t, core, 1, "one core server at a time")
		require.False(t, coreLeft && nonCoreStarted, "no non-core server before every core server is done")
	}
}

// The sliding window: a slot freed by one server starts the next at once;
// the window is never exceeded, and servers down for other reasons count.
func TestSlidingWindow(t *testing.T) {
	fs := fleetServers(0, 8, time.Minute)
	fs[0].Boot = 20 * time.Minute // one slow server must not hold the others
	fs[7].DownNow = true          // down for other reasons: takes a slot
	o := opts()
	o.Concurrency = plan.Count(3)
	w := newWorld(t, fs, "", o)
	p := w.pass()
	inFlight := 0
	for _, r := range p.Reboots {
		if r.Step.InFlight() {
			inFlight++
		}
	}
	// Offline has one meaning: the server down for other reasons takes a
	// slot, and nothing starts while offline >= concurrency (issue 13 C:
	// the old rule let a down server start in a full window).
	assert.Equal(t, 2, inFlight, "3 slots, one taken by a server that is down")
	assert.Equal(t, plan.StepPending, p.Reboots[7].Step, "the down server waits for its turn")
	assert.Equal(t, plan.StepPending, p.Reboots[2].Step)
	for i := 0; i < 400; i++ {
		w.clk.Advance(10 * time.Second)
		p = w.pass()
		if len(w.fleet.Offline()) > 3 {
			// (ground truth: down servers)
			t.Fatalf("step %d: %d servers offline", i, len(w.fleet.Offline()))
		}
		fast := 0
		for _, r := range p.Reboots[1:7] {
			if r.Step == plan.StepDone {
				fast++
			}
		}
		if fast == 6 {
			assert.True(t, p.Reboots[0].Step.InFlight(), "the others finished while the slow one still runs")
			return
		}
	}
	t.Fatal("the fast servers never finished around the slow one")
}

// stop pauses: no new reboots; in-flight ones finish. run resumes. cancel
// ends the plan: in-flight ones still finish and are recorded.
func TestStopRunCancel(t *testing.T) {
	o := opts()
	o.Concurrency = plan.Count(2)
	w := newWorld(t, fleetServers(0, 6, time.Minute), "", o)
	w.pass()
	p, err := plan.Command(w.ctx, w.store, w.uuid, plan.Stop)
	require.NoError(t, err)
	for i := 0; i < 50; i++ {
		w.clk.Advance(10 * time.Second)
		p = w.pass()
	}
	assert.Equal(t, []string{"cn000", "cn001"}, startOrder(w.snaps), "nothing new starts while stopped")
	assert.Equal(t, plan.StepDone, p.Reboots[0].Step, "in-flight reboots finish")
	assert.Equal(t, plan.StateStopped, p.State)

	_, err = plan.Command(w.ctx, w.store, w.uuid, plan.Run)
	require.NoError(t, err)
	p = w.pass()
	assert.Len(t, startOrder(w.snaps), 4)

	_, err = plan.Command(w.ctx, w.store, w.uuid, plan.Cancel)
	require.NoError(t, err)
	final := w.runUntilDone(10*time.Second, 500)
	assert.Equal(t, plan.StateCanceled, final.State)
	assert.Len(t, startOrder(w.snaps), 4, "nothing starts after cancel")
	assert.Equal(t, plan.StepDone, final.Reboots[3].Step, "the in-flight reboot finished and was recorded")
	assert.NotNil(t, final.Reboots[3].OperationalAt)
	assert.Equal(t, plan.StepPending, final.Reboots[5].Step)
}

// A failed reboot gets canceled_at and an error; the failure budget
// decides whether the plan goes on; a plan is never complete with
// failures or pending reboots.
func TestFailuresAndBudget(t *testing.T) {
	fs := fleetServers(0, 6, time.Minute)
	fs[1].FailJob = true
	fs[2].NeverUp = true
	o := opts()
	o.Concurrency, o.FailureBudget = plan.Count(1), plan.Count(1)
	o2 := o
	w := newWorld(t, fs, "", o)
	final := w.runUntilDone(30*time.Second, 2000)
	assert.Equal(t, plan.StateFailed, final.State)
	assert.NotNil(t, final.Reboots[1].CanceledAt)
	assert.Contains(t, final.Reboots[1].Error, "job failed")
	assert.Contains(t, final.Reboots[2].Error, "services not up")
	assert.Equal(t, plan.StepPending, final.Reboots[3].Step, "over budget: no new reboots")

	o2.FailureBudget = plan.Count(2)
	w = newWorld(t, fs, "", o2)
	final = w.runUntilDone(30*time.Second, 2000)
	assert.Equal(t, plan.StateFailed, final.State, "finished with failures is not complete")
	assert.Equal(t, plan.StepDone, final.Reboots[5].Step, "within budget: the plan went on")
}

// The database shard's primary: frozen before its server's job, checked
// and unfrozen after the server is operational.
func TestShardFreeze(t *testing.T) {
	fs := fleetServers(2, 2, time.Minute)
	w := newWorld(t, fs, "u001", opts())
	final := w.runUntilDone(10*time.Second, 1000)
	assert.Equal(t, plan.StateComplete, final.State)
	frozen, freezes := w.fleet.Frozen()
	assert.False(t, frozen)
	assert.Equal(t, 1, freezes)
	for _, p := range w.snaps {
		r := p.Reboots[1]
		if r.Step == plan.StepJob {
			assert.True(t, r.Frozen)
		}
	}
}

// The executor is killed at every pass (a new one each time, with nothing
// in memory) and the headnode reboots under it: no server gets a second
// job, and the plan completes.
func TestExecutorRestartsEveryPass(t *testing.T) {
	w := newWorld(t, fleetServers(2, 4, 2*time.Minute), "", opts())
	for i := 0; i < 2000; i++ {
		w.exec = w.newExec()
		if p := w.pass(); !p.Unfinished() {
			break
		}
		w.clk.Advance(10 * time.Second)
	}
	p, _ := w.store.Get(w.ctx, w.uuid)
	assert.Equal(t, plan.StateComplete, p.State)
	for s, n := range w.fleet.JobsCreated() {
		assert.Equal(t, 1, n, s)
	}
}

func TestDryRun(t *testing.T) {
	o := opts()
	o.DryRun = true
	w := newWorld(t, fleetServers(1, 3, time.Minute), "u000", o)
	final := w.runUntilDone(10*time.Second, 100)
	assert.Equal(t, plan.StateComplete, final.State)
	assert.Empty(t, w.fleet.JobsCreated(), "a dry run creates no job")
	_, freezes := w.fleet.Frozen()
	assert.Zero(t, freezes)
}

func TestSummaryAndViews(t *testing.T) {
	w := newWorld(t, fleetServers(0, 4, time.Minute), "", opts())
	for i := 0; i < 14; i++ {
		w.pass()
		w.clk.Advance(10 * time.Second)
	}
	p := w.pass()
	s := plan.Summarize(p, w.clk.Now())
	assert.Equal(t, 4, s.Total)
	assert.Equal(t, s.Total, s.Done+s.InFlight+s.Failed+s.Left)
	assert.Contains(t, s.Line(20), fmt.Sprintf("%d/4 done", s.Done))
	assert.Contains(t, plan.Table(p), "cn003")
}
