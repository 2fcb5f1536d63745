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
	// failNext kills the executor at its next action: that action and
	// every later one of the same pass fail (dead), as after a crash
	// (Pass goes on past a refused action, not past its own death).
	failNext, dead bool
	rec            *startRecorder // nil: no notes
	// state, if set, reads the plan's stored state; a job created while
	// it is not running is noted in late.
	state func() plan.State
	late  string
}

// startRecorder notes, for every job start, the ground truth the plan's
// policy is checked against: jobs ended by then (at least the reboots any
// pass can have seen done), whether the blocking condition held, whether
// the windows were in force.
type startRecorder struct {
	notes     map[int]startNote
	cond      string // the blocking condition's name ("" if none)
	windowsOn bool
}

type startNote struct {
	ended           int
	condHeld, inWin bool
}

var errKilled = errors.New("test: executor killed before acting")

// Observe starts a pass: a new executor after a kill.
func (f *flakyFleet) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	f.dead = false
	return f.Fleet.Observe(ctx, p)
}

// ObserveView starts a pass, as Observe.
func (f *flakyFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	f.dead = false
	return f.Fleet.ObserveView(ctx, v)
}

func (f *flakyFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if f.failNext || f.dead {
		f.failNext, f.dead = false, true
		return errKilled
	}
	if f.state != nil {
		if st := f.state(); st != plan.StateRunning && f.late == "" {
			n := len(f.Fleet.Starts())
			defer func() {
				if len(f.Fleet.Starts()) > n {
					f.late = fmt.Sprintf("job for %s created while the plan was %s", a.Server, st)
				}
			}()
		}
	}
	if f.rec == nil {
		return f.Fleet.CreateJob(ctx, a)
	}
	n, ended := len(f.Fleet.Starts()), f.Fleet.JobsEnded()
	held := f.rec.cond == "" || f.Fleet.ConditionHolds(f.rec.cond)
	err := f.Fleet.CreateJob(ctx, a)
	if len(f.Fleet.Starts()) > n {
		f.rec.notes[n] = startNote{ended: ended, condHeld: held, inWin: f.rec.windowsOn}
	}
	return err
}

func (f *flakyFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if f.failNext || f.dead {
		f.failNext, f.dead = false, true
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
	rapidcheck.Check(t, func(t *rapid.T) { planStateMachine(t, false, false) })
}

// TestPlanStateMachineViews is TestPlanStateMachine with passes on views
// (plan.Views over the store, fake.Fleet.ObserveView): each pass reads,
// observes and writes only the reboots in flight and the next pending
// ones, and the same invariants hold against the same ground truth.
func TestPlanStateMachineViews(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) { planStateMachine(t, true, false) })
}

// TestPlanPolicyStateMachine is TestPlanStateMachine (whole plans or views,
// drawn) with a drawn policy: servers labelled by rack and zone with
// limits per rack and per zone (a count or a percentage), a canary ramp,
// a daily maintenance window in a drawn time zone plus an absolute range,
// and a blocking condition the world flips at any step. Checked against
// ground truth at every job start, besides the invariants above:
//   - the windows were open (while the plan had them), and stayed open
//     for the reboot's expected length (Windows.Expect);
//   - the blocking condition held;
//   - the servers offline in the server's rack and zone (fake.Start,
//     down for any reason included) were below each domain's limit;
//   - the servers offline were below the ramp's limit for the number of
//     jobs that had ended by then (fake.Fleet.JobsEnded: at least the
//     reboots any pass can have seen done).
//
// At the end the world behaves, the condition holds, the operator drops
// the windows and runs the plan: it finishes.
func TestPlanPolicyStateMachine(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) { planStateMachine(t, rapid.Bool().Draw(t, "views"), true) })
}

// policy is the drawn policy of TestPlanPolicyStateMachine.
type policy struct {
	windows *plan.Windows
	limits  []plan.DomainLimit
	labels  map[string]map[string]string
	cond    string
}

func drawPolicy(t *rapid.T, fs []fake.FleetServer, o *plan.CreateOptions) *policy {
	pol := &policy{labels: map[string]map[string]string{}}
	racks := rapid.IntRange(1, 4).Draw(t, "racks")
	for i := range fs {
		rack := rapid.IntRange(0, racks-1).Draw(t, "rack")
		fs[i].Labels = map[string]string{"rack": fmt.Sprintf("r%d", rack), "zone": fmt.Sprintf("z%d", rack%2)}
		pol.labels[fs[i].UUID] = fs[i].Labels
	}
	if rapid.Bool().Draw(t, "rackLimit") {
		pol.limits = append(pol.limits, plan.DomainLimit{Label: "rack", Max: rapid.IntRange(1, 2).Draw(t, "perRack")})
	}
	if rapid.Bool().Draw(t, "zoneLimit") {
		pol.limits = append(pol.limits, plan.DomainLimit{Label: "zone", Max: rapid.IntRange(10, 60).Draw(t, "zonePercent"), Percent: true})
	}
	o.DomainLimits = pol.limits
	if rapid.Bool().Draw(t, "ramp") {
		stages := rapid.SliceOfN(rapid.IntRange(1, 3), 1, 3).Draw(t, "stages")
		slices.Sort(stages) // a ramp only goes up
		for _, n := range stages {
			o.Ramp = append(o.Ramp, plan.Count(n))
		}
	}
	if rapid.Bool().Draw(t, "windows") {
		zone := rapid.SampledFrom([]string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}).Draw(t, "zone")
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		open := fake.Epoch.Add(time.Duration(rapid.IntRange(0, 24).Draw(t, "opensAt")) * 10 * time.Minute).In(loc)
		length := time.Duration(rapid.IntRange(1, 18).Draw(t, "length")) * 10 * time.Minute
		end := open.Add(length)
		w := &plan.Windows{TimeZone: zone, Weekly: []string{fmt.Sprintf("daily %02d:%02d-%02d:%02d", open.Hour(), open.Minute(), end.Hour(), end.Minute())},
			Expect: time.Duration(rapid.IntRange(0, 30).Draw(t, "expect")) * time.Minute}
		if rapid.Bool().Draw(t, "range") {
			s := fake.Epoch.Add(time.Duration(rapid.IntRange(0, 240).Draw(t, "rangeAt")) * time.Minute)
			w.Ranges = []plan.Range{{Start: s, End: s.Add(time.Duration(rapid.IntRange(1, 120).Draw(t, "rangeLength")) * time.Minute)}}
		}
		o.Windows, pol.windows = w, w
	}
	if rapid.Bool().Draw(t, "condition") {
		pol.cond = "no-alerts"
		o.Conditions = []plan.Condition{{Name: pol.cond, Command: []string{"check"}}}
	}
	return pol
}

// checkPolicy checks every job start against the drawn policy.
func checkPolicy(t *rapid.T, w *world, p plan.Plan, pol *policy, rec *startRecorder) {
	size := map[string]int{}
	for _, l := range pol.labels {
		for k, v := range l {
			size[k+"="+v]++
		}
	}
	for k, st := range w.fleet.Starts() {
		note, ok := rec.notes[k]
		if !ok {
			t.Fatalf("job start %d (%s) not noted", k, st.Server)
		}
		if note.inWin {
			open, closes, err := pol.windows.Open(st.At)
			if err != nil || !open {
				t.Fatalf("job for %s started at %s, outside the windows %v (%v)", st.Server, st.At, pol.windows.Weekly, err)
			}
			if st.At.Add(pol.windows.Expect).After(closes) {
				t.Fatalf("job for %s started at %s, the window closes at %s, before a reboot of %s could finish", st.Server, st.At, closes, pol.windows.Expect)
			}
		}
		if !note.condHeld {
			t.Fatalf("job for %s started at %s while the blocking condition failed", st.Server, st.At)
		}
		if lim := plan.RampLimit(p.Ramp, p.Concurrency, note.ended); len(st.Offline) >= lim {
			t.Fatalf("job for %s started at %s with %d other servers offline, ramp %v allows %d after %d jobs ended:\n%s",
				st.Server, st.At, len(st.Offline), p.Ramp, lim, note.ended, plan.Table(p))
		}
		for _, l := range pol.limits {
			v := pol.labels[st.Server][l.Label]
			n := 0
			for _, id := range st.Offline {
				if pol.labels[id][l.Label] == v {
					n++
				}
			}
			if lim := l.Of(size[l.Label+"="+v]); n >= lim {
				t.Fatalf("job for %s started at %s with %d other servers offline in %s %s %v, limit %d:\n%s",
					st.Server, st.At, n, l.Label, v, st.Offline, lim, plan.Table(p))
			}
		}
	}
}

func planStateMachine(t *rapid.T, views, withPolicy bool) {
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
		var pol *policy
		var rec *startRecorder
		if withPolicy {
			pol = drawPolicy(t, fs, &o)
			rec = &startRecorder{notes: map[int]startNote{}, cond: pol.cond, windowsOn: pol.windows != nil}
		}
		w := newWorld(t, fs, primary, o)
		gc := rapid.Bool().Draw(t, "gc")
		if gc {
			w.fleet.SetRetain(time.Duration(rapid.IntRange(0, 600).Draw(t, "retain")) * time.Second)
		}
		stored := func() plan.State {
			p, err := w.store.Get(w.ctx, w.uuid)
			if err != nil {
				return plan.StateRunning // (an injected failure: no verdict)
			}
			return p.State
		}
		ff := &flakyFleet{Fleet: w.fleet, rec: rec, state: stored}
		ff2 := &flakyFleet{Fleet: w.fleet, rec: rec, state: stored}
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
		idlePasses := 0 // successful passes in a row after which the shard was frozen with no job
		// idleTime is the time between those passes (the clock between two
		// successful idle passes in a row). A primary's job asked for may
		// run until the fleet had Config.ShowTimeout (1 min) to show it, so
		// the shard stays frozen meanwhile: the bound is two ShowTimeouts
		// (its asks again, then the wait after the last one) and two pass
		// gaps (at most 2 min here), never a number of passes alone.
		var (
			idleTime time.Duration
			idleAt   time.Time
			lastOK   bool
		)
		const idleBound = 2*time.Minute + 2*2*time.Minute
		pass := func(e *plan.Executor) {
			before, _ := w.store.Get(w.ctx, w.uuid)
			_, err := e.Pass(w.ctx, w.uuid)
			if err != nil && !errors.Is(err, fake.ErrUnavailable) && !errors.Is(err, errKilled) && !errors.Is(err, plan.ErrConflict) &&
				!strings.Contains(err.Error(), "injected") {
				t.Fatalf("pass: %v", err)
			}
			p, _ := w.store.Get(w.ctx, w.uuid)
			checkPlan(t, w, before, p, prev, lastCmd)
			checkOverTime(t, w, p, gc, ff, ff2)
			switch {
			case !w.fleet.ShardIdle():
				idlePasses, idleTime = 0, 0
			case err == nil:
				if idlePasses > 0 && lastOK {
					idleTime += w.clk.Now().Sub(idleAt)
				}
				idleAt = w.clk.Now()
				if idlePasses++; idlePasses > 1 && idleTime > idleBound {
					t.Fatalf("the shard stayed frozen with no job on its primary over %d passes and %s (%s so far):\n%s",
						idlePasses, idleTime, w.fleet.FrozenWithoutJob(), plan.Table(p))
				}
			}
			lastOK = err == nil
			if pol != nil {
				checkPolicy(t, w, p, pol, rec)
			}
			prev = p
		}
		ids := make([]string, len(fs))
		for i, f := range fs {
			ids[i] = f.UUID
		}
		steps := rapid.IntRange(10, 120).Draw(t, "steps")
		actions := 15
		if pol != nil && pol.cond != "" {
			actions = 17
		}
		for step := 0; step < steps; step++ {
			switch rapid.IntRange(0, actions).Draw(t, "action") {
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
			case 16, 17:
				if pol != nil && pol.cond != "" {
					ok := rapid.Bool().Draw(t, "conditionHolds")
					w.fleet.SetCondition(pol.cond, ok, map[bool]string{false: "ALERT firing"}[ok])
					break
				}
				fallthrough
			default:
				w.clk.Advance(time.Duration(rapid.IntRange(1, 120).Draw(t, "dt")) * time.Second)
			}
			pass(exec)
		}

		// A canceled plan ends with the faults still on (servers down or
		// hidden, the condition failing, the windows in force): held
		// reboots are released, nothing starts.
		pendingCmd = ""
		ff.failNext = false
		if lastCmd == "cancel" {
			for i := 0; ; i++ {
				pass(exec)
				if p, _ := w.store.Get(w.ctx, w.uuid); !p.Unfinished() {
					break
				} else if i == 3000 {
					t.Fatalf("a canceled plan did not end with the faults on (%s):\n%s", p.Waiting, plan.Table(p))
				}
				w.clk.Advance(2 * time.Minute)
			}
		}

		// The world behaves; the operator runs the plan unless canceled.
		for _, id := range ids {
			w.fleet.SetDown(id, false)
			w.fleet.Hide(id, false)
		}
		ff.failNext = false
		if pol != nil {
			if pol.cond != "" {
				w.fleet.SetCondition(pol.cond, true, "")
			}
			rec.windowsOn = false
			for i := 0; i < 10; i++ { // (a pending injected store failure may eat one)
				if _, err := plan.Command(w.ctx, w.store, w.uuid, func(p plan.Plan) (plan.Plan, error) {
					q := p.Clone()
					q.Windows = nil
					return q, nil
				}); err == nil {
					break
				}
			}
		}
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

// checkOverTime checks what must hold at every moment, from ground truth:
// no job was created while the stored plan was not running (after a
// stop, a cancel or its end), and a reboot counted failed had a job
// created (a reboot that never started is no failure), but for the two
// steps before the job that time out on their own (the headnode's
// services, the shard's freeze).
func checkOverTime(t *rapid.T, w *world, p plan.Plan, gc bool, ffs ...*flakyFleet) {
	for _, f := range ffs {
		if f.late != "" {
			t.Fatalf("%s:\n%s", f.late, plan.Table(p))
		}
	}
	created := w.fleet.JobsCreated()
	for _, r := range p.Reboots {
		// A reboot recorded as never started had no job (the fleet shows
		// a job it created at once here, within Config.ShowTimeout), but
		// when the fleet collects jobs before the executor saw them
		// (gc, which breaks RetainJobs): a job never seen is then taken
		// for one the fleet refused, and the record says it may be either.
		if r.Step == plan.StepReleased && created[r.ServerUUID] > 0 && !gc {
			t.Fatalf("%s released (%s) although a job of it was created:\n%s", r.ServerHostname, r.Error, plan.Table(p))
		}
		if r.CanceledAt == nil || created[r.ServerUUID] > 0 ||
			strings.HasPrefix(r.Error, "headnode services not up") || strings.HasPrefix(r.Error, "database shard not frozen") {
			continue
		}
		t.Fatalf("%s counted failed (%s) although no job of it was ever created:\n%s", r.ServerHostname, r.Error, plan.Table(p))
	}
}

func checkPlan(t *rapid.T, w *world, before, p, prev plan.Plan, lastCmd string) {
	core, coreLeft, nonCore := 0, false, false
	for i, r := range p.Reboots {
		// A core reboot in failed_unfreeze failed (its job ended) and
		// only asks for the shard's unfreeze: like a failed one, it
		// holds the core order no longer (Offline, NextView).
		if r.Core && r.Step.InFlight() && r.Step != plan.StepFailFreeze {
			core++
		}
		if r.Core && !r.Step.Ended() && r.Step != plan.StepFailFreeze {
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
				plan.BoltNoSync(bs) // the executors are killed, not the machine
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
