package plan_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

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

func genFleet(t *rapid.T) ([]fake.FleetServer, string) {
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
			s.DownNow = !s.Headnode // the executor runs on the headnode
		}
		fs = append(fs, s)
	}
	primary := ""
	if rapid.Bool().Draw(t, "shard") {
		primary = fs[rapid.IntRange(0, len(fs)-1).Draw(t, "primary")].UUID
	}
	return fs, primary
}

// TestPlanStateMachine runs random plans on random fleets with stop, run
// and cancel at random times and executors killed between any two steps
// (restarted with nothing in memory, or killed after saving the plan and
// before acting). After every pass:
//   - a pass never starts a reboot that takes the servers of the plan in
//     flight or down (not yet rebooted) beyond the concurrency (servers
//     already down may start: they add nothing; core servers go one at a
//     time whatever the concurrency);
//   - at most one core server in flight, and none but core servers until
//     every core server has ended;
//   - no server ever gets a second reboot job;
//   - a reboot that started never goes back to pending, and nothing starts
//     while the plan is stopped, canceled or over its failure budget;
//   - the plan is never complete while a reboot is pending or failed.
func TestPlanStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		fs, primary := genFleet(t)
		o := opts()
		o.Concurrency = plan.Count(rapid.IntRange(1, 4).Draw(t, "concurrency"))
		o.FailureBudget = plan.Count(rapid.IntRange(0, 3).Draw(t, "budget"))
		w := newWorld(t, fs, primary, o)
		ff := &flakyFleet{Fleet: w.fleet}
		newExec := func() { w.exec = &plan.Executor{Fleet: ff, Store: w.store, Now: w.clk.Now} }
		newExec()
		prev, _ := w.store.Get(w.ctx, w.uuid)
		for step := 0; step < 150; step++ {
			switch rapid.IntRange(0, 12).Draw(t, "action") {
			case 0:
				newExec()
			case 1:
				ff.failNext = true
			case 2:
				p, _ := w.store.Get(w.ctx, w.uuid)
				if q, err := plan.Stop(p); err == nil {
					_ = w.store.Put(w.ctx, q)
				}
			case 3:
				p, _ := w.store.Get(w.ctx, w.uuid)
				if q, err := plan.Run(p); err == nil {
					_ = w.store.Put(w.ctx, q)
				}
			case 4:
				if rapid.IntRange(0, 3).Draw(t, "reallyCancel") == 0 {
					p, _ := w.store.Get(w.ctx, w.uuid)
					if q, err := plan.Cancel(p); err == nil {
						_ = w.store.Put(w.ctx, q)
					}
				}
			case 5:
				w.store.FailPuts(1)
			default:
				w.clk.Advance(time.Duration(rapid.IntRange(1, 120).Draw(t, "dt")) * time.Second)
			}
			before, _ := w.store.Get(w.ctx, w.uuid)
			_, err := w.exec.Pass(w.ctx, w.uuid)
			if err != nil && !errors.Is(err, fake.ErrUnavailable) && !errors.Is(err, errKilled) && err.Error() == "" {
				t.Fatal(err)
			}
			p, _ := w.store.Get(w.ctx, w.uuid)
			checkPlan(t, w, before, p, prev)
			prev = p
		}
	})
}

func checkPlan(t *rapid.T, w *world, before, p, prev plan.Plan) {
	offline := map[string]bool{}
	for _, id := range w.fleet.Offline() {
		offline[id] = true
	}
	n, nBefore, core, coreLeft, nonCore, startedNow := 0, 0, 0, false, false, false
	for i, r := range p.Reboots {
		if r.Step.InFlight() || r.Step == plan.StepPending && offline[r.ServerUUID] {
			n++
		}
		if b := before.Reboots[i]; b.Step.InFlight() || b.Step == plan.StepPending && offline[b.ServerUUID] {
			nBefore++
		}
		if before.Reboots[i].Step == plan.StepPending && r.Step != plan.StepPending {
			startedNow = true
		}
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
	// Servers down for other reasons may exceed the limit by themselves;
	// the plan must then not add to them.
	if n > p.Concurrency && n > nBefore && startedNow && !coreStarted(before, p) {
		t.Fatalf("%d servers offline or in flight, concurrency %d:\n%s", n, p.Concurrency, plan.Table(p))
	}
	if core > 1 || coreLeft && nonCore {
		t.Fatalf("core order broken (%d core in flight, core left %v, non-core started %v):\n%s", core, coreLeft, nonCore, plan.Table(p))
	}
	for s, c := range w.fleet.JobsCreated() {
		if c > 1 {
			t.Fatalf("server %s got %d jobs", s, c)
		}
	}
}

// TestCrashedExecutorResumesToSamePlan: a plan run by executors that are
// killed between any two steps ends exactly as the same plan run by one
// executor that never dies: same end state, same outcome for every server,
// one job per server.
func TestCrashedExecutorResumesToSamePlan(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		fs, primary := genFleet(t)
		o := opts()
		o.Concurrency = plan.Count(rapid.IntRange(1, 4).Draw(t, "concurrency"))
		o.FailureBudget = plan.Count(len(fs)) // outcomes then depend on the servers only
		kills := rapid.SliceOfN(rapid.IntRange(0, 2), 0, 400).Draw(t, "kills")

		run := func(crash bool) plan.Plan {
			w := newWorld(t, fs, primary, o)
			ff := &flakyFleet{Fleet: w.fleet}
			w.exec = &plan.Executor{Fleet: ff, Store: w.store, Now: w.clk.Now}
			for i := 0; i < 10000; i++ {
				if crash && i < len(kills) {
					switch kills[i] {
					case 1:
						w.exec = &plan.Executor{Fleet: ff, Store: w.store, Now: w.clk.Now}
					case 2:
						ff.failNext = true
					}
				}
				_, _ = w.exec.Pass(w.ctx, w.uuid)
				if p, _ := w.store.Get(w.ctx, w.uuid); !p.Unfinished() {
					for s, c := range w.fleet.JobsCreated() {
						if c != 1 {
							t.Fatalf("server %s: %d jobs", s, c)
						}
					}
					return p
				}
				w.clk.Advance(time.Minute)
			}
			p, _ := w.store.Get(w.ctx, w.uuid)
			t.Fatalf("plan did not finish (crash=%v):\n%s", crash, plan.Table(p))
			return plan.Plan{}
		}
		a, b := run(false), run(true)
		if a.State != b.State {
			t.Fatalf("end state %s without crashes, %s with", a.State, b.State)
		}
		for i := range a.Reboots {
			if a.Reboots[i].Step != b.Reboots[i].Step {
				t.Fatalf("%s: %s without crashes, %s with", a.Reboots[i].ServerHostname, a.Reboots[i].Step, b.Reboots[i].Step)
			}
		}
	})
}

// coreStarted reports whether a core server started between before and
// after (core servers go one at a time whatever the concurrency).
func coreStarted(before, after plan.Plan) bool {
	for i, r := range after.Reboots {
		if r.Core && before.Reboots[i].Step == plan.StepPending && r.Step != plan.StepPending {
			return true
		}
	}
	return false
}
