package plan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"
)

// Store errors.
var (
	// ErrNotFound: no plan with that UUID.
	ErrNotFound = errors.New("plan: not found")
	// ErrCorrupt: a stored plan document cannot be read; it is left as it
	// is for a person to look at.
	ErrCorrupt = errors.New("plan: stored plan is corrupt")
)

// Store keeps plans.
type Store interface {
	// Get returns the plan or an error wrapping ErrNotFound or ErrCorrupt.
	Get(ctx context.Context, uuid string) (Plan, error)
	// Put writes the plan durably (it survives a crash right after Put
	// returns) and atomically (a crash never leaves half a document).
	Put(ctx context.Context, p Plan) error
	// List returns every readable plan.
	List(ctx context.Context) ([]Plan, error)
}

// Fleet is the executor's view of the datacenter.
type Fleet interface {
	// Observe returns the state of the plan's servers, of their jobs and
	// of the database shard.
	Observe(ctx context.Context, p Plan) (Observations, error)
	// CreateJob creates the reboot job a.JobUUID for a.Server (with drain,
	// on behalf of plan a.PlanUUID). It must be idempotent: a job that
	// exists already is not created again.
	CreateJob(ctx context.Context, a Action) error
	// FreezeShard and UnfreezeShard freeze and unfreeze the database
	// shard; both are idempotent.
	FreezeShard(ctx context.Context) error
	UnfreezeShard(ctx context.Context) error
}

// Executor runs plans: each pass loads the plan, observes the fleet,
// decides with Next, saves the plan, then acts. It keeps nothing in memory
// between passes, so it may be killed at any point (the headnode it runs on
// reboots as part of the plan) and resumes from the store without a second
// job or a second reboot for any server.
type Executor struct {
	Fleet  Fleet
	Store  Store
	Config Config
	// Now is the executor's clock.
	Now func() time.Time
	// Logger, if set, gets a line per pass that changed the plan.
	Logger *slog.Logger
}

// Pass runs one pass for the plan and returns the plan as saved.
func (e *Executor) Pass(ctx context.Context, uuid string) (Plan, error) {
	p, err := e.Store.Get(ctx, uuid)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: load: %w", uuid, err)
	}
	obs, err := e.Fleet.Observe(ctx, p)
	if err != nil {
		return p, fmt.Errorf("plan %s: observe: %w", uuid, err)
	}
	q, acts := e.Config.Next(p, obs, e.Now())
	if !reflect.DeepEqual(p, q) {
		if err := e.Store.Put(ctx, q); err != nil {
			return p, fmt.Errorf("plan %s: save: %w", uuid, err)
		}
		if e.Logger != nil {
			s := Summarize(q, e.Now())
			e.Logger.Info("reboot plan", "plan", uuid, "state", string(q.State), "done", s.Done,
				"inFlight", s.InFlight, "failed", s.Failed, "left", s.Left)
		}
	}
	for _, a := range acts {
		var err error
		switch a.Kind {
		case ActionCreateJob:
			err = e.Fleet.CreateJob(ctx, a)
		case ActionFreeze:
			err = e.Fleet.FreezeShard(ctx)
		case ActionUnfreeze:
			err = e.Fleet.UnfreezeShard(ctx)
		}
		if err != nil {
			// The plan is saved; the next pass sees what is missing and
			// asks again.
			return q, fmt.Errorf("plan %s: %s for %s: %w", uuid, a.Kind, a.Server, err)
		}
	}
	return q, nil
}

// Run runs passes until the plan is finished and nothing is in flight,
// calling wait between passes (a real executor sleeps; a simulation moves
// its clock). Errors of a pass are logged and retried after wait; Run
// returns when wait returns an error (e.g. the context is done) or the plan
// cannot be loaded.
func (e *Executor) Run(ctx context.Context, uuid string, wait func(context.Context) error) (Plan, error) {
	for {
		p, err := e.Pass(ctx, uuid)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			return p, err
		case err != nil && e.Logger != nil:
			e.Logger.Warn("reboot plan pass failed", "plan", uuid, "error", err.Error())
		case err == nil && !p.Unfinished():
			return p, nil
		}
		if err := wait(ctx); err != nil {
			return p, err
		}
	}
}
