package plantest

import (
	"context"
	"errors"
	"fmt"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// Errors the kit's fleet gives an executor.
var (
	// errKilled: the executor died (after its read, or after its save
	// and before or while acting): the call never reached the fleet.
	errKilled = errors.New("plantest: executor killed")
	// errRefused: the server's BMC refuses, so the fleet refuses its
	// reboot job (nothing is created).
	errRefused = errors.New("plantest: the fleet refuses the job (the server's BMC refuses)")
)

// Compile-time checks: the executors see every ability of fake.Fleet.
var (
	_ plan.ViewFleet     = (*kitFleet)(nil)
	_ plan.ShardFleet    = (*kitFleet)(nil)
	_ plan.HeadnodeFleet = (*kitFleet)(nil)
)

// kitFleet is one executor's handle on the fake fleet: it kills that
// executor when told, refuses the jobs of servers whose BMC refuses, runs
// the world's second writer between the executor's read and its save
// (its Observe comes between them), and checks every job start against
// the fleet's ground truth.
type kitFleet struct {
	*fake.Fleet
	w *world
	// killObserve kills the executor in its next Observe (after its read,
	// before its save); killAct at its next action (after its save): that
	// action and every later one of the pass fail (dead), as after a
	// crash.
	killObserve, killAct, dead bool
	// second: the fleet of the second executor, which never runs the
	// world's hook.
	second bool
}

// Observe implements plan.Fleet: a new pass.
func (f *kitFleet) Observe(ctx context.Context, p plan.Plan) (plan.Observations, error) {
	if err := f.startPass(p.Version); err != nil {
		return plan.Observations{}, err
	}
	return f.Fleet.Observe(ctx, p)
}

// ObserveView implements plan.ViewFleet: a new pass.
func (f *kitFleet) ObserveView(ctx context.Context, v plan.View) (plan.Observations, error) {
	if err := f.startPass(v.Version); err != nil {
		return plan.Observations{}, err
	}
	return f.Fleet.ObserveView(ctx, v)
}

// startPass starts a pass whose read returned version: the second writer
// (if one is due) writes now, between that read and the pass's save.
func (f *kitFleet) startPass(version string) error {
	f.dead = false
	if !f.second {
		f.w.overtaken(version)
		f.w.between(version)
	}
	if f.killObserve {
		f.killObserve = false
		return errKilled
	}
	return nil
}

// act fails the action if the executor is dead or dies at it.
func (f *kitFleet) act() error {
	if f.killAct || f.dead {
		f.killAct, f.dead = false, true
		return errKilled
	}
	return nil
}

// CreateJob implements plan.Fleet; a job the fleet starts is checked
// against ground truth (world.started).
func (f *kitFleet) CreateJob(ctx context.Context, a plan.Action) error {
	if err := f.act(); err != nil {
		return err
	}
	if f.w.refuse[a.Server] || f.w.refuseForGood[a.Server] {
		return fmt.Errorf("%w: %s", errRefused, a.Server)
	}
	n, jobs, ended := len(f.Fleet.Starts()), len(f.Fleet.JobsCreated()), f.Fleet.JobsEnded()
	err := f.Fleet.CreateJob(ctx, a)
	if starts := f.Fleet.Starts(); len(starts) > n {
		f.w.started(starts[n], jobs, ended)
	}
	return err
}

// CancelJob implements plan.Fleet.
func (f *kitFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Fleet.CancelJob(ctx, a)
}

// FreezeShard implements plan.ShardFleet.
func (f *kitFleet) FreezeShard(ctx context.Context) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Fleet.FreezeShard(ctx)
}

// UnfreezeShard implements plan.ShardFleet.
func (f *kitFleet) UnfreezeShard(ctx context.Context) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Fleet.UnfreezeShard(ctx)
}

// started checks a job start against the fleet's ground truth: jobs
// created before it (servers with a job) and ended by then, as the fleet
// counted them just before. The first violation is kept for the step's
// check (the executor is in the middle of its pass).
func (w *world) started(st fake.Start, jobs, ended int) {
	bad := ""
	switch {
	case w.halted != "":
		bad = fmt.Sprintf("job for %s created after the operator's %s landed", st.Server, w.halted)
	case len(st.Offline) >= w.conc:
		bad = fmt.Sprintf("job for %s created with %d other servers offline %v (ground truth), concurrency %d",
			st.Server, len(st.Offline), st.Offline, w.conc)
	case w.core[st.Server] && w.nonCoreStarted:
		bad = fmt.Sprintf("job for core server %s created after a job of a server that is not core", st.Server)
	case w.core[st.Server] && ended < jobs:
		bad = fmt.Sprintf("job for core server %s created while another core server's job runs (%d of %d jobs ended): core servers go one at a time",
			st.Server, ended, jobs)
	case !w.core[st.Server] && !w.nonCoreStarted && ended < jobs:
		bad = fmt.Sprintf("job for %s, not core, created while a core server's job runs (%d of %d jobs ended): core servers go first",
			st.Server, ended, jobs)
	}
	if !w.core[st.Server] {
		w.nonCoreStarted = true
	}
	if bad != "" && w.violation == "" {
		w.violation = bad
	}
}
