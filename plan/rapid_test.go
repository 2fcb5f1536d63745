package plan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/rapidcheck"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"pgregory.net/rapid"
)

// flakyFleet fails the next action (before it reaches the fleet), as an
// executor killed right after saving the plan would.
type flakyFleet struct {
	*fake.Fleet
	failNext bool
}

var errKilled = errors.New("test: executor killed before acting")

func (f *flakyFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if f.failNext {
		f.failNext = false
		return errKilled
	}
	return f.Fleet.CreateJob(ctx, a)
}

func (f *flakyFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if f.failNext {
		f.failNext = false
		return errKilled
	}
	return f.Fleet.CancelJob(ctx, a)
}

// genFleet draws a fleet; with downForGood, some servers are down for
// other reasons from the start and never come back.
func genFleet(t *rapid.T, downForGood bool) ([]fake.FleetServer, string) {
	core := rapid.IntRange(0, 3).Draw(t, "core")
	rest := rapid.IntRange(1, 10).Draw(t, "rest")
	var fs []fake.FleetServer
	sec := func(name string, lo, hi int) time.Duration {
		return time.Duration(rapid.IntRange(lo, hi).Draw(t, name)) * time.Second
	}
	for i := 0; i < core+rest; i++ {
		s := fake.FleetServer{UUID: fmt.Sprintf("u%02d", i), Hostname: fmt.Sprintf("cn%02d", i), Platform: "1",
			Queue: sec("queue", 0, 30), Drain: sec("drain", 0, 120), Shutdown: sec("shutdown", 0, 30),
			Boot: sec("boot", 10, 900), Services: sec("services", 0, 600)}
		if i < core {
			s.Core = true
		}
		s.Headnode = i == 0 && core > 0
		switch rapid.IntRange(0, 9).Draw(t, "fate") {
		case 0:
			s.FailJob = true
		case 1:
			s.NeverUp = true
		case 2:
			s.DownNow = downForGood && !s.Headnode // the executor runs on the headnode
		}
		fs = append(fs, s)
	}
	primary := ""
	if rapid.Bool().Draw(t, "shard") {
		primary = fs[rapid.IntRange(0, len(fs)-1).Draw(t, "primary")].UUID
	}
	return fs, primary
}

// TestPlanStateMachine runs random plans on random fleets in a world drawn
// to lie and race: servers going down and up for reasons of their own or
// missing from the observations, jobs slower than the plan's timeouts that
// keep running after the plan gave up on them (until cancelled through the
// fleet, and then may still reboot their server), finished jobs
// garbage-collected, an operator issuing stop, run or cancel between any
// read and write of the executors, two executors racing on one plan,
// executors killed between any two steps (restarted with nothing in
// memory, or killed after saving the plan and before acting), and a clock
// stepping at any precision. Checked against ground truth after every step:
//   - every reboot job the fleet started (fake.Fleet.Starts) found fewer
//     than concurrency other servers offline at that instant (down, or with
//     a job that had not ended), core servers included;
//   - no server ever gets a second reboot job;
//   - the operator's last command always wins (cancel: canceled for good;
//     stop: stopped unless the plan ended; run: running unless it ended);
//   - a reboot that started never goes back to pending, at most one core
//     server is in flight and none but core servers until every core
//     server has ended, and the plan is never complete while a reboot is
//     pending or failed.
//
// At the end the world behaves and the operator runs the plan: it finishes.
func TestPlanStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) { planStateMachine(t, false) })
}

// TestPlanStateMachineViews is TestPlanStateMachine with passes on views
// (plan.Views over the store, fake.Fleet.ObserveView): each pass reads,
// observes and writes only the reboots in flight and the next pending
// ones, and the same invariants hold against the same ground truth.
func TestPlanStateMachineViews(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) { planStateMachine(t, true) })
}

func planStateMachine(t *rapid.T, views bool) {
	{
		fs, primary := genFleet(t, false)
		o := opts()
		o.Concurrency = plan.Count(rapid.IntRange(1, 4).Draw(t, "concurrency"))
		o.FailureBudget = plan.Count(rapid.IntRange(0, 3).Draw(t, "budget"))
		cfg := plan.Config{
			DrainTimeout:    time.Duration(rapid.IntRange(30, 900).Draw(t, "drainTimeout")) * time.Second,
			JobTimeout:      time.Duration(rapid.IntRange(60, 3600).Draw(t, "jobTimeout")) * time.Second,
			ServicesTimeout: time.Duration(rapid.IntRange(60, 3600).Draw(t, "servicesTimeout")) * time.Second,
		}
		w := newWorld(t, fs, primary, o)
		if rapid.Bool().Draw(t, "gc") {
			w.fleet.SetRetain(time.Duration(rapid.IntRange(0, 600).Draw(t, "retain")) * time.Second)
		}
		ff := &flakyFleet{Fleet: w.fleet}
		ff2 := &flakyFleet{Fleet: w.fleet}
		var store plan.Store = w.store
		if views {
			store = plan.Views(w.store)
		}
		newExec := func(f plan.Fleet) *plan.Executor {
			return &plan.Executor{Fleet: f, Store: store, Now: w.clk.Now, Config: cfg}
		}
		exec, exec2 := newExec(ff), newExec(ff2)
		lastCmd := ""
		command := func(name string) {
			f := map[string]func(plan.Plan) (plan.Plan, error){"stop": plan.Stop, "run": plan.Run, "cancel": plan.Cancel}[name]
			if _, err := plan.Command(w.ctx, w.store, w.uuid, f); err == nil {
				lastCmd = name
			} else if !errors.Is(err, plan.ErrState) && !strings.Contains(err.Error(), "injected") {
				t.Fatalf("operator %s: %v", name, err)
			}
		}
		// The operator may act between an executor's read and its write.
		var pendingCmd string
		inCmd := false
		w.store.SetInterloper(func(string) {
			if c := pendingCmd; c != "" && !inCmd {
				pendingCmd, inCmd = "", true
				command(c)
				inCmd = false
			}
		})
		prev, _ := w.store.Get(w.ctx, w.uuid)
		pass := func(e *plan.Executor) {
			before, _ := w.store.Get(w.ctx, w.uuid)
			_, err := e.Pass(w.ctx, w.uuid)
			if err != nil && !errors.Is(err, fake.ErrUnavailable) && !errors.Is(err, errKilled) && !errors.Is(err, plan.ErrConflict) &&
				!strings.Contains(err.Error(), "injected") {
				t.Fatalf("pass: %v", err)
			}
			p, _ := w.store.Get(w.ctx, w.uuid)
			checkPlan(t, w, before, p, prev, lastCmd)
			prev = p
		}
		ids := make([]string, len(fs))
		for i, f := range fs {
			ids[i] = f.UUID
		}
		steps := rapid.IntRange(10, 120).Draw(t, "steps")
		for step := 0; step < steps; step++ {
			switch rapid.IntRange(0, 15).Draw(t, "action") {
			case 0:
				exec = newExec(ff) // restarted, nothing in memory
			case 1:
				ff.failNext = true // killed after saving, before acting
			case 2, 3:
				command(rapid.SampledFrom([]string{"stop", "run", "run", "cancel"}).Draw(t, "command"))
			case 4:
				pendingCmd = rapid.SampledFrom([]string{"stop", "run", "cancel"}).Draw(t, "racingCommand")
			case 5:
				w.store.FailPuts(1)
			case 6:
				pass(exec2) // a second executor
			case 7:
				id := rapid.SampledFrom(ids).Draw(t, "downServer")
				if id != ids[0] || !fs[0].Headnode {
					w.fleet.SetDown(id, rapid.Bool().Draw(t, "down"))
				}
			case 8:
				w.fleet.Hide(rapid.SampledFrom(ids).Draw(t, "hidden"), rapid.Bool().Draw(t, "hide"))
			case 9:
				w.clk.Apply(fake.DrawClockMove(t, "tick", false))
			default:
				w.clk.Advance(time.Duration(rapid.IntRange(1, 120).Draw(t, "dt")) * time.Second)
			}
			pass(exec)
		}

		// The world behaves; the operator runs the plan unless canceled.
		pendingCmd = ""
		for _, id := range ids {
			w.fleet.SetDown(id, false)
			w.fleet.Hide(id, false)
		}
		ff.failNext = false
		for i := 0; i < 10 && lastCmd != "cancel" && lastCmd != "run"; i++ {
			command("run") // (a pending injected store failure may eat one)
		}
		for i := 0; i < 3000; i++ {
			pass(exec)
			if p, _ := w.store.Get(w.ctx, w.uuid); !p.Unfinished() {
				return
			}
			w.clk.Advance(2 * time.Minute)
		}
		p, _ := w.store.Get(w.ctx, w.uuid)
		t.Fatalf("plan did not finish once the world behaved (%s):\n%s", p.Waiting, plan.Table(p))
	}
}

func checkPlan(t *rapid.T, w *world, before, p, prev plan.Plan, lastCmd string) {
	core, coreLeft, nonCore := 0, false, false
	for i, r := range p.Reboots {
		if r.Core && r.Step.InFlight() {
			core++
		}
		if r.Core && !r.Step.Ended() {
			coreLeft = true
		}
		if !r.Core && r.Step != plan.StepPending {
			nonCore = true
		}
		if prev.Reboots[i].Step != plan.StepPending && r.Step == plan.StepPending {
			t.Fatalf("%s went back to pending", r.ServerHostname)
		}
		started := before.Reboots[i].Step == plan.StepPending && r.Step != plan.StepPending
		if started && before.State != plan.StateRunning {
			t.Fatalf("%s started while the plan was %s", r.ServerHostname, before.State)
		}
		if r.Step == plan.StepPending && p.State == plan.StateComplete || r.CanceledAt != nil && p.State == plan.StateComplete {
			t.Fatalf("plan complete with %s %s", r.ServerHostname, r.Step)
		}
	}
	if core > 1 || coreLeft && nonCore {
		t.Fatalf("core order broken (%d core in flight, core left %v, non-core started %v):\n%s", core, coreLeft, nonCore, plan.Table(p))
	}
	for _, st := range w.fleet.Starts() {
		if len(st.Offline) >= p.Concurrency {
			t.Fatalf("job for %s started at %v with %d other servers offline %v, concurrency %d:\n%s",
				st.Server, st.At, len(st.Offline), st.Offline, p.Concurrency, plan.Table(p))
		}
	}
	for s, c := range w.fleet.JobsCreated() {
		if c > 1 {
			t.Fatalf("server %s got %d jobs", s, c)
		}
	}
	ok := map[string][]plan.State{"": nil, "cancel": {plan.StateCanceled},
		"stop": {plan.StateStopped, plan.StateComplete, plan.StateFailed},
		"run":  {plan.StateRunning, plan.StateComplete, plan.StateFailed}}[lastCmd]
	if ok != nil && !slices.Contains(ok, p.State) {
		t.Fatalf("the operator's last command was %s, the plan is %s", lastCmd, p.State)
	}
}

// TestCrashedExecutorResumesToSamePlan: a plan run by executors that are
// killed between any two steps ends exactly as the same plan run by one
// executor that never dies: same end state, same outcome for every server,
// one job per server.
func TestCrashedExecutorResumesToSamePlan(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		fs, primary := genFleet(t, false)
		o := opts()
		o.Concurrency = plan.Count(rapid.IntRange(1, 4).Draw(t, "concurrency"))
		o.FailureBudget = plan.Count(len(fs)) // outcomes then depend on the servers only
		kills := rapid.SliceOfN(rapid.IntRange(0, 2), 0, 400).Draw(t, "kills")

		// run runs the plan to its end; with crash, executors are killed
		// as drawn; with bolt, on the bbolt store with passes on views.
		run := func(crash, bolt bool) plan.Plan {
			w := newWorld(t, fs, primary, o)
			var store plan.Store = w.store
			if bolt {
				dir, err := os.MkdirTemp("", "plan-rapid")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(dir)
				bs, err := plan.OpenBolt(filepath.Join(dir, "plans.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer bs.Close()
				p, _ := w.store.Get(w.ctx, w.uuid)
				p.Version = ""
				if err := bs.Create(w.ctx, p); err != nil {
					t.Fatal(err)
				}
				store = bs
			}
			ff := &flakyFleet{Fleet: w.fleet}
			w.exec = &plan.Executor{Fleet: ff, Store: store, Now: w.clk.Now}
			for i := 0; i < 10000; i++ {
				if crash && i < len(kills) {
					switch kills[i] {
					case 1:
						w.exec = &plan.Executor{Fleet: ff, Store: store, Now: w.clk.Now}
					case 2:
						ff.failNext = true
					}
				}
				_, _ = w.exec.Pass(w.ctx, w.uuid)
				if p, _ := store.Get(w.ctx, w.uuid); !p.Unfinished() {
					for s, c := range w.fleet.JobsCreated() {
						if c != 1 {
							t.Fatalf("server %s: %d jobs", s, c)
						}
					}
					return p
				}
				w.clk.Advance(time.Minute)
			}
			p, _ := store.Get(w.ctx, w.uuid)
			t.Fatalf("plan did not finish (crash=%v bolt=%v):\n%s", crash, bolt, plan.Table(p))
			return plan.Plan{}
		}
		a := run(false, false)
		for _, b := range []plan.Plan{run(true, false), run(true, true)} {
			if a.State != b.State {
				t.Fatalf("end state %s without crashes, %s with", a.State, b.State)
			}
			for i := range a.Reboots {
				if a.Reboots[i].Step != b.Reboots[i].Step {
					t.Fatalf("%s: %s without crashes, %s with", a.Reboots[i].ServerHostname, a.Reboots[i].Step, b.Reboots[i].Step)
				}
			}
		}
	})
}
