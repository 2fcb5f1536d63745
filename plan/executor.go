package plan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Store errors.
var (
	// ErrNotFound: no plan with that UUID.
	ErrNotFound = errors.New("plan: not found")
	// ErrCorrupt: a stored plan document cannot be read, or does not match
	// its key; it is left as it is for a person to look at.
	ErrCorrupt = errors.New("plan: stored plan is corrupt")
	// ErrConflict: the plan changed since it was read (compare-and-swap);
	// read it again and decide again.
	ErrConflict = errors.New("plan: changed since it was read")
	// ErrExists: a plan with that UUID exists already.
	ErrExists = errors.New("plan: a plan with that uuid exists")
	// ErrTooLarge: a document or a plan over the documented limits
	// (MaxDocumentBytes, MaxServers).
	ErrTooLarge = errors.New("plan: over the size limits")
	// ErrInvalidUUID: a plan UUID a store cannot hold safely.
	ErrInvalidUUID = errors.New("plan: invalid plan uuid")
)

// Store keeps plans. Every write is compare-and-swap on the version a read
// returned (Plan.Version), so that an operator's run, stop or cancel and
// an executor's pass written at the same time are never lost: one of them
// gets ErrConflict and decides again from a fresh read.
type Store interface {
	// Get returns the plan with its current Version, or an error wrapping
	// ErrNotFound or ErrCorrupt.
	Get(ctx context.Context, uuid string) (Plan, error)
	// Create stores a new plan. It fails with ErrExists if the UUID is
	// taken, and with ErrServerInPlan if a server of p is in another
	// unfinished plan (the store checks this, so no caller can forget it).
	Create(ctx context.Context, p Plan) error
	// Put writes the plan if p.Version is the stored version, else returns
	// an error wrapping ErrConflict. It writes durably (it survives a crash
	// right after Put returns) and atomically (a crash never leaves half a
	// document), and never overwrites a corrupt document.
	Put(ctx context.Context, p Plan) error
	// List returns every readable plan; unreadable ones are reported in the
	// error (wrapping ErrCorrupt) after the readable ones.
	List(ctx context.Context) ([]Plan, error)
}

// Fleet is the executor's view of the datacenter.
type Fleet interface {
	// Observe returns the state of the plan's servers, of their jobs and
	// of the database shard. A server of the plan missing from the result
	// counts as offline.
	Observe(ctx context.Context, p Plan) (Observations, error)
	// CreateJob creates the reboot job a.JobUUID for a.Server (with drain,
	// on behalf of plan a.PlanUUID). It must be idempotent: a job that
	// exists already is not created again. The fleet must keep a job it
	// created (finished or not) for at least RetainJobs, so that the
	// executor sees how it ended, and show it in Observe within
	// Config.ShowTimeout of the call (a job not shown by then may be
	// taken for lost, ShowTimeout after the first pass that follows the
	// call: its server no longer counts offline).
	CreateJob(ctx context.Context, a Action) error
	// CancelJob asks the job a.JobUUID to stop. A job that already sent
	// its reboot command reboots the server all the same; the executor
	// counts the server offline until Observe reports the job ended.
	CancelJob(ctx context.Context, a Action) error
}

// ShardFleet is a Fleet with a database shard whose primary's reboot is
// wrapped in a freeze (sdcadm's vocabulary): an optional ability, found by
// type assertion. A Fleet that is not a ShardFleet has no shard: the
// Executor ignores the ShardPrimary it reports and never freezes.
type ShardFleet interface {
	// FreezeShard and UnfreezeShard freeze and unfreeze the database
	// shard; both are idempotent.
	FreezeShard(ctx context.Context) error
	UnfreezeShard(ctx context.Context) error
}

// HeadnodeFleet is a Fleet with a headnode whose services every reboot
// waits for (the wait_headnode step): an optional ability, found by type
// assertion. Its Observe reports Observations.HeadnodeServicesUp. A Fleet
// that is not a HeadnodeFleet, or whose HasHeadnode is false, has none:
// no reboot waits for a headnode.
type HeadnodeFleet interface {
	HasHeadnode() bool
}

// RetainJobs is how long a Fleet must keep a job after it ended.
const RetainJobs = 24 * time.Hour

// Executor runs plans: each pass loads the plan, observes the fleet,
// decides with Next, saves the plan, then acts. It keeps nothing in memory
// between passes (but a cache of plans' failure domains, which never
// change, and which servers' fleet calls ran out of time lately, to take
// them last), so it may be killed at any point (the headnode it runs on
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
	// Fence, if not 0, is copied into every action (Action.Fence): the
	// executor's fencing token, e.g. its leadership's revision, increasing
	// with every new leader.
	Fence int64
	// CallTimeout bounds each fleet call of a pass (CreateJob, CancelJob,
	// FreezeShard, UnfreezeShard; default DefaultCallTimeout); a call also
	// gets at most a quarter of what is left of the pass's context, when
	// it has a deadline, while three other actions or more wait after it
	// (an equal share of it among the pass's actions left when fewer
	// are: the last one has all of it), and at most half of what is left
	// of the executor's pass when its plan shares it with others (half of
	// the whole pass in its plan's long turn: see callShare and Turns). A call that runs out of its time (its own
	// deadline passed, even when it is the pass's) is reported
	// (ErrCallTimeout) and its server's actions are taken after all others
	// in the next passes of the process, until one answers in time: one
	// call that hangs never uses up the passes, and a server whose calls
	// are slow has, asked last, all that the others left.
	CallTimeout time.Duration
}

// domainTables caches the domain tables of plans passed on views, by plan
// UUID and creation time, for every Executor of the process (executors
// are often made per pass): a plan's servers and labels never change, so
// a table is read once. At most maxDomainTables plans are kept.
var domainTables struct {
	sync.Mutex
	m map[string]*DomainTable
}

const maxDomainTables = 16

// domainTable returns the domain table of v's plan, reading the whole plan
// once per process (every pass for a plan without a creation time: its
// UUID alone does not tell it from another plan of that UUID).
func (e *Executor) domainTable(ctx context.Context, v View) (*DomainTable, error) {
	key := ""
	if v.CreatedAt != nil {
		key = v.UUID + "@" + v.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	domainTables.Lock()
	t := domainTables.m[key]
	domainTables.Unlock()
	if key != "" && t.fits(v) {
		return t, nil
	}
	p, err := e.Store.Get(ctx, v.UUID)
	if err != nil {
		return nil, err
	}
	t = DomainTableOf(p)
	if key == "" {
		return t, nil
	}
	domainTables.Lock()
	defer domainTables.Unlock()
	if domainTables.m == nil || len(domainTables.m) >= maxDomainTables {
		domainTables.m = map[string]*DomainTable{}
	}
	domainTables.m[key] = t
	return t, nil
}

// Pass runs one pass for the plan and returns the plan as saved. Before
// its first reboot job, again every 16 jobs, and before every freeze of
// the database shard, it reads the plan's state again (its state alone
// on a StateStore, the header alone on a HeadStore) and starts nothing
// more (no job, no freeze) once the plan is not running: a
// stop or cancel that landed after the pass saved is followed by at most
// 16 job creations of that pass (those between two reads), none when it
// landed before the first. On a CommandStore it also reads the state
// again before any job for which CommandPending says a command of the
// plan landed since its last read: a command is followed by no job
// creation but the one in flight as it landed (and those within the
// store's documented comparison time, on the etcd store). When the
// Store is a ViewStore and the Fleet a ViewFleet, the pass reads, observes
// and writes only the reboots in flight and the next pending ones
// (O(in flight) whatever the plan's size), and the returned View holds
// just those; otherwise it works on the whole plan and returns a full
// view. An action the fleet refuses or fails is reported (every such
// error joined) and asked again by the next pass; it never holds back the
// actions of other servers.
func (e *Executor) Pass(ctx context.Context, uuid string) (View, error) {
	vs, okStore := e.Store.(ViewStore)
	vf, okFleet := e.Fleet.(ViewFleet)
	var (
		v   View
		obs Observations
		err error
	)
	if okStore && okFleet {
		if v, err = vs.GetView(ctx, uuid); err != nil {
			return View{}, fmt.Errorf("plan %s: load: %w", uuid, err)
		}
		if len(v.DomainLimits) > 0 && !v.Full() && !v.Domains.fits(v) {
			if v.Domains, err = e.domainTable(ctx, v); err != nil {
				return View{}, fmt.Errorf("plan %s: load its failure domains: %w", uuid, err)
			}
		}
		obs, err = vf.ObserveView(ctx, v)
	} else {
		var p Plan
		if p, err = e.Store.Get(ctx, uuid); err != nil {
			return View{}, fmt.Errorf("plan %s: load: %w", uuid, err)
		}
		v = FullView(p)
		obs, err = e.Fleet.Observe(ctx, p)
	}
	if err != nil {
		return v, fmt.Errorf("plan %s: observe: %w", uuid, err)
	}
	hf, ok := e.Fleet.(HeadnodeFleet)
	obs.Headnode = ok && hf.HasHeadnode()
	sf, isShard := e.Fleet.(ShardFleet)
	if !isShard {
		obs.ShardPrimary, obs.ShardFrozen = "", false // no shard to freeze
	}
	q, acts := e.Config.NextView(v, obs, e.Now())
	if !sameView(v, q) {
		// Compare-and-swap on the version read: an operator's command (or
		// a second executor) written since wins, and this pass is decided
		// again from a fresh read, before any action is taken.
		if okStore && okFleet {
			err = vs.PutView(ctx, q)
		} else {
			err = e.Store.Put(ctx, q.Plan)
		}
		if err != nil {
			return v, fmt.Errorf("plan %s: save: %w", uuid, err)
		}
		if e.Logger != nil {
			s := q.Summary()
			e.Logger.Info("reboot plan", "plan", uuid, "state", string(q.State), "done", s.Done,
				"inFlight", s.InFlight, "failed", s.Failed, "left", s.Left)
		}
	}
	creates := 0
	// An action refused or failed for one server never holds back the
	// others' (a fleet that refuses the job of a server whose BMC is dead
	// would otherwise keep every later server of the plan from starting:
	// issue 38, A.1); the server's later actions of this pass are skipped.
	// The plan is saved: the next pass sees what is missing and asks again.
	var errs []error
	failed := map[string]bool{}
	ordered := slowLast(uuid, acts)
	for k, a := range ordered {
		left := len(ordered) - k // this action and the ones after it
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", uuid, ctx.Err()))
			break // stopping: the next pass asks again
		}
		if failed[a.Server] {
			continue
		}
		a.Fence = e.Fence
		var err error
		switch a.Kind {
		case ActionCreateJob, ActionFreeze:
			// A freeze starts a reboot as much as its job does (the
			// shard stays frozen until the next pass unfreezes it): it
			// is looked at like the first job, whatever came before.
			recheck := creates%recheckEvery == 0 || a.Kind == ActionFreeze
			if cs, ok := e.Store.(CommandStore); ok && !recheck {
				// A command waiting next to the store: read the state
				// again now (the read applies it), not 16 jobs later.
				pending, perr := cs.CommandPending(ctx, uuid)
				if perr != nil {
					return q, errors.Join(append(errs, fmt.Errorf("plan %s: look for operators' commands before creating a job: %w", uuid, perr))...)
				}
				recheck = pending
			}
			if recheck {
				// An operator's stop or cancel may have landed since the
				// read: look again before the first job, every
				// recheckEvery jobs and every freeze, and start nothing
				// once it is not running (the reboots asked for are taken
				// for lost after ShowTimeout, and held or released; a
				// frozen reboot held is unfrozen by the next pass).
				running, rerr := e.running(ctx, uuid)
				if rerr != nil {
					return q, errors.Join(append(errs, fmt.Errorf("plan %s: read its state before %s: %w", uuid, startWhat(a.Kind), rerr))...)
				}
				if !running {
					return q, errors.Join(errs...)
				}
			}
			if a.Kind == ActionFreeze {
				if !isShard {
					err = errors.New("the fleet has no database shard") // not decided: ShardPrimary was cleared
				} else {
					err = e.call(ctx, left, a, sf.FreezeShard)
				}
				break
			}
			creates++
			err = e.call(ctx, left, a, func(ctx context.Context) error { return e.Fleet.CreateJob(ctx, a) })
		case ActionCancelJob:
			err = e.call(ctx, left, a, func(ctx context.Context) error { return e.Fleet.CancelJob(ctx, a) })
		case ActionUnfreeze:
			if !isShard {
				err = errors.New("the fleet has no database shard") // not decided: ShardPrimary was cleared
			} else {
				err = e.call(ctx, left, a, sf.UnfreezeShard)
			}
		}
		if err != nil {
			failed[a.Server] = true
			errs = append(errs, fmt.Errorf("plan %s: %s for %s: %w", uuid, a.Kind, a.Server, err))
		}
	}
	return q, errors.Join(errs...)
}

// startWhat names what a start action (a job's creation, a freeze) is,
// for errors.
func startWhat(k ActionKind) string {
	if k == ActionFreeze {
		return "freezing the database shard"
	}
	return "creating jobs"
}

// recheckEvery is how many jobs a pass creates between two reads of the
// plan's state (Executor.Pass).
const recheckEvery = 16

// CommandStore is a Store that tells whether operators' commands (Run,
// Stop, Cancel) landed since a read: next to the store, before the store
// has them, to be applied at its next read (rebootctl's FILE.commands),
// or in the store by another process (rebootctl's commands applied
// directly): an optional ability, found by type assertion. The Executor asks it before every job it creates, and when a
// command of the plan waits it reads the plan's state again (which
// applies it) before creating the job: no job is created after a command
// has landed, but the one being created as it landed.
type CommandStore interface {
	// CommandPending reports whether a command of plan uuid landed
	// after the Executor's last read of the plan's state before its jobs
	// (GetState on a StateStore, else GetHead on a HeadStore, else Get):
	// one not applied yet, or one applied since by another reader (the
	// state this pass read is older than it either way). A read made for
	// anything else (a power-off check's, concurrent with the pass) must
	// not count as that read. It is called once per job created, so it
	// must be cheap (a store may answer from a comparison a short time
	// old, and document how long: the etcd store's is 20 ms); an error
	// keeps the pass from creating more jobs.
	CommandPending(ctx context.Context, uuid string) (bool, error)
}

// StateStore is a Store that reads a plan's state alone, without its
// header's other fields or its reboots: an optional ability, found by
// type assertion. The Executor reads the state before every recheckEvery
// jobs it creates; through a StateStore that read copies nothing of the
// plan (the etcd module's Store implements it).
type StateStore interface {
	// GetState returns the stored plan's state, or an error wrapping
	// ErrNotFound or ErrCorrupt.
	GetState(ctx context.Context, uuid string) (State, error)
}

// running reads whether the stored plan is still running: its state alone
// on a StateStore, its header alone on a HeadStore (one small read), else
// the whole plan.
func (e *Executor) running(ctx context.Context, uuid string) (bool, error) {
	if ss, ok := e.Store.(StateStore); ok {
		st, err := ss.GetState(ctx, uuid)
		return st == StateRunning, err
	}
	if hs, ok := e.Store.(HeadStore); ok {
		h, err := hs.GetHead(ctx, uuid)
		return h.State == StateRunning, err
	}
	p, err := e.Store.Get(ctx, uuid)
	return p.State == StateRunning, err
}

// Run runs passes until the plan is finished and nothing is in flight,
// calling wait between passes (a real executor sleeps; a simulation moves
// its clock). Errors of a pass are logged and retried after wait; Run
// returns when wait returns an error (e.g. the context is done) or the plan
// cannot be loaded.
func (e *Executor) Run(ctx context.Context, uuid string, wait func(context.Context) error) (View, error) {
	for {
		p, err := e.Pass(ctx, uuid)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			return p, err
		case errors.Is(err, ErrConflict) && ctx.Err() == nil:
			continue // someone wrote in between: decide again at once
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
