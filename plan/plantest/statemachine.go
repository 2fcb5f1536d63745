package plantest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/plan"
)

// StateMachine is the property test of plan.Executor over the store (a
// fresh one per case from newStore), run with rapid: one plan over a fake
// datacenter (fake.Fleet, whose ground truth every check reads), passes of
// the Executor (Pass, and Run to the end) on Stores.Store as given (through
// plan.Views in some cases when it is not a plan.ViewStore), and between
// any two steps: the executor killed (after its read, or after its save
// and before or while acting) or restarted with nothing in memory; a
// second writer on the same store between the executor's read and its
// save (the operator's run, stop and cancel as rebootctl applies them,
// plan.CommandView with plan.Record; a tool rewriting the whole plan,
// plan.Edit; a second executor's whole pass), or between passes; a write
// with a stale Version through each write method the store has (Put,
// PutHead, PutView); the executor's wall clock stepping or jumping
// (fake.DrawClockMove); and the fleet's faults: jobs that fail, servers
// whose services never come back, servers down for reasons of their own,
// missing from the observations, BMCs that refuse (the fleet refuses the
// job), jobs slower than the plan's timeouts.
//
// Checked after every step, against ground truth (the fake fleet, and
// what the kit wrote), never against the plan's own record:
//   - every job started with fewer than the plan's concurrency other
//     servers offline (fake.Start), core servers one at a time and before
//     every other (no job starts while a core server's job runs, none
//     on a core server after one that is not);
//   - no job starts after the operator's stop or cancel landed (until a
//     run lands), and the stored plan's state is the last command's;
//   - one job and one reboot per server;
//   - a write whose Version is stale never lands: the executor's save
//     after a second writer wrote between its read and its save, and the
//     kit's own (each must fail with plan.ErrConflict and write nothing);
//     and a Version never comes back with another plan than it had. The
//     Version is opaque to the kit: "it increases" is checked as "a
//     write that lands gives a version never returned with other
//     contents" (a store whose version is a hash of the contents passes).
//
// At the end the faults the design survives stay on (jobs that fail,
// servers whose services never come back, BMCs that refuse for good,
// servers dead for good while fewer than the concurrency), the others
// stop, the operator runs the plan unless it was canceled, and a second
// writer still races some passes: Executor.Run must end the plan within
// the plan's timeouts (a dead server is failed after its timeout,
// never a stall), and then every server the plan really rebooted is up
// or named failed in the plan, and the database shard is not left
// frozen.
//
// It draws 20 cases, rapid's 100 with REBOOTKIT_LONG=1 (-rapid.checks or
// RAPID_CHECKS choose the count); rapid saves a failing case under
// testdata/rapid/<TestName>/ of the calling package and replays it first
// on every later run: commit it with the fix.
func StateMachine(t *testing.T, newStore NewStore) {
	rapidcheck.Check(t, func(t *rapid.T) { stateMachine(t, newStore) })
}

// planUUID is the plan every case runs (each on a fresh store).
const planUUID = "plantest-state-machine"

func stateMachine(t *rapid.T, newStore NewStore) {
	stores, err := newStore()
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	if stores.Close != nil {
		defer stores.Close()
	}
	store := stores.Store
	clk := fake.NewClock(fake.Epoch)
	// Half the cases draw no fleet faults and no clock jumps: their plans
	// run to the end through kills, restarts and second writers alone.
	faults := rapid.Bool().Draw(t, "faults")
	fs, dead := drawFleet(t, faults)
	primary := ""
	if rapid.Bool().Draw(t, "shard") {
		primary = fs[rapid.IntRange(0, len(fs)-1).Draw(t, "primary")].UUID
	}
	w := &world{t: t, ctx: context.Background(), clk: clk, store: store, uuid: planUUID,
		core: map[string]bool{}, refuse: map[string]bool{}, refuseForGood: map[string]bool{}, versions: map[string][32]byte{}}
	// The datacenter lives on real time; the executors read the wall
	// clock, which jumps.
	w.fleet = fake.NewFleet(clk.Real, primary, fs...)
	w.conc = rapid.IntRange(1, 4).Draw(t, "concurrency")
	var ids, mayDie []string
	for _, s := range fs {
		ids = append(ids, s.UUID)
		w.core[s.UUID] = s.Core || s.Headnode
		if !s.Headnode { // the executors run on the headnode
			mayDie = append(mayDie, s.UUID)
		}
		if faults && rapid.IntRange(0, 14).Draw(t, "refusesForGood") == 0 {
			w.refuseForGood[s.UUID] = true
		}
	}
	dead = dead[:min(len(dead), w.conc-1)] // more would stall the plan by design
	p, _, err := plan.Create(w.fleet.Servers(), plan.CreateOptions{UUID: planUUID, Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(w.conc), FailureBudget: plan.Count(rapid.IntRange(0, 3).Draw(t, "budget")), CreatedAt: clk.Now()})
	if err != nil {
		t.Fatalf("plantest: create the plan: %v", err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatalf("plantest: run the plan: %v", err)
	}
	if err := store.Create(w.ctx, p); err != nil {
		t.Fatalf("Create: %v", err)
	}
	w.read()
	cfg := plan.Config{
		DrainTimeout:    time.Duration(rapid.IntRange(150, 900).Draw(t, "drainTimeout")) * time.Second,
		JobTimeout:      time.Duration(rapid.IntRange(300, 3600).Draw(t, "jobTimeout")) * time.Second,
		ServicesTimeout: time.Duration(rapid.IntRange(1800, 3600).Draw(t, "servicesTimeout")) * time.Second,
	}
	execStore := store
	if _, ok := store.(plan.ViewStore); !ok && rapid.Bool().Draw(t, "views") {
		execStore = plan.Views(store)
	}
	ff := &kitFleet{Fleet: w.fleet, w: w}
	ff2 := &kitFleet{Fleet: w.fleet, w: w, second: true}
	newExec := func(f *kitFleet) *plan.Executor {
		return &plan.Executor{Fleet: f, Store: execStore, Now: clk.Now, Config: cfg}
	}
	exec, exec2 := newExec(ff), newExec(ff2)
	pass := func(e *plan.Executor) {
		_, err := e.Pass(w.ctx, w.uuid)
		if err != nil && !passError(err) {
			t.Fatalf("pass: %v", err)
		}
		w.afterPass()
		w.read()
		w.check()
	}

	steps := rapid.IntRange(5, 80).Draw(t, "steps")
	for step := 0; step < steps; step++ {
		action := rapid.IntRange(0, 15).Draw(t, "action")
		if !faults && action >= 7 && action <= 9 {
			action = 15 // time passes instead
		}
		switch action {
		case 0:
			exec = newExec(ff) // restarted, nothing in memory
		case 1:
			if rapid.Bool().Draw(t, "killAfterSave") {
				ff.killAct = true
			} else {
				ff.killObserve = true
			}
		case 2:
			w.command(drawCommand(t, "command"))
		case 3:
			name := drawCommand(t, "racingCommand")
			w.hook = func() { w.command(name) }
		case 4:
			w.hook = w.rewrite
		case 5:
			w.hook = func() { pass(exec2) } // a second executor's whole pass
		case 6:
			pass(exec2)
		case 7:
			w.fleet.SetDown(rapid.SampledFrom(mayDie).Draw(t, "downServer"), rapid.Bool().Draw(t, "down"))
		case 8:
			w.fleet.Hide(rapid.SampledFrom(ids).Draw(t, "hidden"), rapid.Bool().Draw(t, "hide"))
		case 9:
			w.refuse[rapid.SampledFrom(ids).Draw(t, "refusing")] = rapid.Bool().Draw(t, "refuses")
		case 10:
			clk.Apply(fake.DrawClockMove(t, "clock", faults))
		case 11:
			w.held = w.read()
		case 12:
			w.staleWrite(rapid.IntRange(0, 2).Draw(t, "staleMethod"))
		default:
			clk.Advance(time.Duration(rapid.IntRange(1, 120).Draw(t, "dt")) * time.Second)
		}
		pass(exec)
	}
	liveness(w, ff, newExec, cfg, ids, dead)
}

// drawCommand draws an operator's command: a cancel ends the case's
// plan, so it is drawn less often than a stop or a run.
func drawCommand(t *rapid.T, label string) string {
	return rapid.SampledFrom([]string{"stop", "stop", "stop", "run", "run", "run", "run", "cancel"}).Draw(t, label)
}

// passError reports whether err is one a pass may return in the kit's
// world: a conflict (a second writer won), an executor killed, a job
// refused, the executor's headnode down.
func passError(err error) bool {
	return errors.Is(err, plan.ErrConflict) || errors.Is(err, errKilled) || errors.Is(err, errRefused) ||
		errors.Is(err, fake.ErrUnavailable)
}

// drawFleet draws the datacenter: core servers (the first one the
// headnode), then the rest, each with its reboot's timings and, with
// faults, its fate; dead are the servers that go down for good at the end (never the
// headnode).
func drawFleet(t *rapid.T, faults bool) (fs []fake.FleetServer, dead []string) {
	core := rapid.IntRange(0, 2).Draw(t, "core")
	rest := rapid.IntRange(1, 8).Draw(t, "rest")
	sec := func(name string, lo, hi int) time.Duration {
		return time.Duration(rapid.IntRange(lo, hi).Draw(t, name)) * time.Second
	}
	for i := 0; i < core+rest; i++ {
		s := fake.FleetServer{UUID: fmt.Sprintf("u%02d", i), Hostname: fmt.Sprintf("cn%02d", i), Platform: "1",
			Core: i < core, Headnode: i == 0 && core > 0,
			Queue: sec("queue", 0, 30), Drain: sec("drain", 0, 120), Shutdown: sec("shutdown", 0, 30),
			Boot: sec("boot", 10, 900), Services: sec("services", 0, 600)}
		fate := -1
		if faults {
			fate = rapid.IntRange(0, 9).Draw(t, "fate")
		}
		switch fate {
		case 0:
			s.FailJob = true
		case 1:
			s.NeverUp = true
		case 2:
			s.Shutdown = sec("slowJob", 1800, 7200) // slower than most JobTimeouts
		case 3:
			if !s.Headnode {
				dead = append(dead, s.UUID)
			}
		}
		fs = append(fs, s)
	}
	return fs, dead
}

// liveness ends the case: the faults the design survives stay on, the
// others stop; the operator runs the plan unless it was canceled; a
// second writer races every fourth pass; Executor.Run must end the plan
// within its timeouts, and every server it rebooted be up or named failed.
func liveness(w *world, ff *kitFleet, newExec func(*kitFleet) *plan.Executor, cfg plan.Config, ids, dead []string) {
	t := w.t
	w.hook = nil
	ff.killObserve, ff.killAct, ff.dead = false, false, false
	clear(w.refuse)
	for _, id := range ids {
		w.fleet.Hide(id, false)
		w.fleet.SetDown(id, false)
	}
	for _, id := range dead {
		w.fleet.SetDown(id, true)
	}
	if w.read().State == plan.StateStopped {
		w.command("run")
	}
	// Each reboot ends within its timeouts (the freeze's, the job's, the
	// services' and the headnode's before it), plus the time to see a
	// job, the headnode's boot (no pass runs meanwhile) and a few passes.
	per := cfg.DrainTimeout + cfg.JobTimeout + 2*cfg.ServicesTimeout + time.Minute + 15*time.Minute + 10*time.Minute
	bound := time.Duration(len(ids))*per + time.Hour
	start := w.clk.Real()
	waits := 0
	errTooLong := errors.New("plantest: the plan did not end in time")
	wait := func(context.Context) error {
		w.afterPass()
		w.read()
		w.check()
		if w.clk.Real().Sub(start) > bound {
			return errTooLong
		}
		if waits++; waits%4 == 0 {
			w.hook = w.rewrite
		}
		w.clk.Advance(2 * time.Minute)
		return nil
	}
	_, err := newExec(ff).Run(w.ctx, w.uuid, wait)
	w.afterPass()
	p := w.read()
	w.check()
	if err != nil || p.Unfinished() {
		t.Fatalf("the plan did not end within %s with the faults the design survives on (dead %v, refusing for good %v): %v (%s):\n%s",
			bound, dead, sortedKeys(w.refuseForGood), err, p.Waiting, plan.Table(p))
	}
	// Servers the kit keeps down for good are down whatever the plan did.
	down := map[string]bool{}
	for _, id := range w.fleet.Offline() {
		down[id] = !slices.Contains(dead, id)
	}
	for _, r := range p.Reboots {
		if w.fleet.Reboots()[r.ServerUUID] > 0 && down[r.ServerUUID] && r.CanceledAt == nil {
			t.Fatalf("%s was rebooted by the plan, is down (ground truth), and the plan, ended, does not name it failed:\n%s", r.ServerHostname, plan.Table(p))
		}
	}
	if frozen, _ := w.fleet.Frozen(); frozen {
		t.Fatalf("the plan ended with the database shard frozen:\n%s", plan.Table(p))
	}
}
