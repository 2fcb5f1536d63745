package plan

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"time"
)

// Config holds the step timeouts. The zero value takes the seed's values.
type Config struct {
	// DrainTimeout: the job must have drained the server's agent tasks
	// this long after it started. Default 15 min.
	DrainTimeout time.Duration
	// JobTimeout: the reboot job must finish this long after it was
	// created. Default 1 h.
	JobTimeout time.Duration
	// ServicesTimeout: the server's services (and the headnode's, before
	// the next server starts) must be up this long after the job finished.
	// It bounds the unfreeze too: the database shard its primary's reboot
	// froze must be healthy and unfrozen this long after the primary's
	// services came up. Unhealthy, it is left frozen (the reboot fails, for
	// a person to look at); healthy but still frozen (the fleet refuses
	// or ignores the unfreeze), the reboot fails and goes on asking in
	// failed_unfreeze, where it holds no slot (Offline) and Plan.Waiting
	// names the shard. Default 1 h.
	ServicesTimeout time.Duration
	// ConditionMaxAge: a blocking condition's result older than this
	// holds the plan as a failure would (it must be checked before each
	// start). Default 2 min.
	ConditionMaxAge time.Duration
	// ShowTimeout: a reboot job asked for (CreateJob) must show in the
	// fleet's observations this long after the (last) ask's call
	// returned; a pass counts it from the start of the first pass after
	// the ask (Reboot.ShowFrom), a point known to follow the call. Until then it
	// may run, so its server counts offline and its reboot is neither
	// held nor released; after it, a job never shown is taken for lost
	// (never created: the executor was killed before it acted, or the
	// fleet refused it) and the reboot waits as one that has not started,
	// asked for again when the limits allow. Default 1 min.
	ShowTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 15 * time.Minute
	}
	if c.JobTimeout <= 0 {
		c.JobTimeout = time.Hour
	}
	if c.ServicesTimeout <= 0 {
		c.ServicesTimeout = time.Hour
	}
	if c.ConditionMaxAge <= 0 {
		c.ConditionMaxAge = 2 * time.Minute
	}
	if c.ShowTimeout <= 0 {
		c.ShowTimeout = time.Minute
	}
	return c
}

// ServerObs is what is observed of one server.
type ServerObs struct {
	// Down: the server is offline, for any reason.
	Down bool
	// ServicesUp: every service it runs (agents; core VMs on core servers)
	// reports healthy.
	ServicesUp bool
}

// JobObs is what is observed of one reboot job.
type JobObs struct {
	Exists    bool
	Started   bool
	Drained   bool
	Finished  bool // the reboot command was sent
	Failed    bool
	Cancelled bool // stopped by CancelJob before it sent the reboot command
	Error     string
	// StartedAt and FinishedAt, when known, are recorded in the plan;
	// otherwise the time of the observation is.
	StartedAt, FinishedAt time.Time
	// Phases, when the fleet knows them, are recorded in the plan's
	// Reboot.Phases for reports (first report of each phase wins).
	Phases Phases
}

// Observations are what the executor observed of the fleet in one pass.
type Observations struct {
	// Servers by UUID; a server of the plan missing from the map counts as
	// offline (nothing is known of it).
	Servers map[string]ServerObs
	// Jobs by job UUID.
	Jobs map[string]JobObs
	// Headnode: the fleet has a headnode whose services every reboot
	// waits for (the wait_headnode step). The Executor sets it from the
	// Fleet's HeadnodeFleet ability; without it HeadnodeServicesUp is not
	// read and no reboot waits for a headnode.
	Headnode bool
	// HeadnodeServicesUp: the headnode's services are healthy (read only
	// with Headnode).
	HeadnodeServicesUp bool
	// ShardPrimary is the UUID of the server hosting the database
	// shard's primary; ShardFrozen and ShardHealthy its state.
	ShardPrimary string
	ShardFrozen  bool
	ShardHealthy bool

	// Conditions are the last results of the plan's blocking conditions
	// (Plan.Conditions), by name; a condition missing here holds the plan.
	Conditions map[string]ConditionResult

	// Partial is set by ViewFleet.ObserveView: Servers and Jobs cover only
	// the view's reboots, and Offline lists the servers the fleet knows to
	// be down or cannot observe; the plan's other servers are up.
	Partial bool
	Offline []string
}

// ActionKind is what an Action does.
type ActionKind string

// Action kinds.
const (
	ActionCreateJob ActionKind = "create-job"
	ActionCancelJob ActionKind = "cancel-job"
	ActionFreeze    ActionKind = "freeze-shard"
	ActionUnfreeze  ActionKind = "unfreeze-shard"
)

// Action is a side effect the executor causes after saving the plan. All
// are idempotent: CreateJob carries the job's UUID, derived from the plan
// and the server, and the fleet must not create a second job with it.
type Action struct {
	Kind     ActionKind
	Server   string
	JobUUID  string
	PlanUUID string
	// Drain asks the job to drain the server's agent first (always true
	// for plan jobs).
	Drain bool
	// Fence is the fencing token of the executor that decided the action
	// (Executor.Fence), 0 if it has none. A fleet that remembers the
	// highest token it has seen and refuses actions with a lower one makes
	// the late actions of a deposed executor (paused after it saved the
	// plan, resumed after another took over) do nothing.
	Fence int64
}

// JobUUID is the UUID of the reboot job of server in plan: the same every
// time for one plan, so that re-creating it after a crash is a no-op, and
// different for another plan (even one given the same UUID later), because
// the plan's creation time is part of it.
func JobUUID(p Plan, serverUUID string) string {
	created := ""
	if p.CreatedAt != nil {
		created = p.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	h := sha1.Sum([]byte("rebootkit/plan\x00" + p.UUID + "\x00" + created + "\x00" + serverUUID))
	h[6] = h[6]&0x0f | 0x50 // version 5 (name-based, SHA-1)
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// ErrState is returned by Run, Stop and Cancel for a transition the plan's
// state does not allow.
var ErrState = errors.New("plan: not allowed in this state")

// Run starts or resumes a created or stopped plan.
func Run(p Plan) (Plan, error) {
	if p.State != StateCreated && p.State != StateStopped && p.State != StateRunning {
		return p, fmt.Errorf("%w: run a %s plan", ErrState, p.State)
	}
	q := p.Clone()
	q.State = StateRunning
	return q, nil
}

// Stop pauses a plan: no new reboots start; in-flight ones finish.
func Stop(p Plan) (Plan, error) {
	if p.State != StateRunning && p.State != StateCreated && p.State != StateStopped {
		return p, fmt.Errorf("%w: stop a %s plan", ErrState, p.State)
	}
	q := p.Clone()
	q.State = StateStopped
	return q, nil
}

// Cancel ends a plan: no new reboots start; in-flight ones finish and are
// recorded.
func Cancel(p Plan) (Plan, error) {
	if p.State.Finished() {
		return p, fmt.Errorf("%w: cancel a %s plan", ErrState, p.State)
	}
	q := p.Clone()
	q.State = StateCanceled
	return q, nil
}

// Next is Config{}.Next.
func Next(p Plan, obs Observations, now time.Time) (Plan, []Action) {
	return Config{}.Next(p, obs, now)
}

// Offline reports whether the server of r counts as offline: observed
// down, not observed at all, its reboot in flight, or a job of ours that
// may still run. A reboot held in wait_headnode (waiting for the
// headnode, its turn, a window or its failure domain, before its job was
// asked for or after the job asked for was taken for lost) does not make
// its server offline while the fleet shows no job of it: nothing of it
// runs there. Nor does a reboot in failed_unfreeze (failed, its job
// ended or never created, the shard still to unfreeze): its server counts
// offline only while observed down, so a shard the fleet will not
// unfreeze holds no slot. Every start decision uses it, core servers
// included.
func Offline(r Reboot, obs Observations) bool {
	o, seen := obs.Servers[r.ServerUUID]
	return !seen || o.Down || r.Step.InFlight() && !r.held(obs) && r.Step != StepFailFreeze
}

// Next advances the plan by what was observed: it records every step each
// in-flight reboot has reached, starts new reboots where the order, the
// concurrency and the plan's state allow, and returns the updated plan and
// the actions to take after saving it. It is pure: p is not modified.
//
// Order: core servers first, one at a time whatever the concurrency (the
// seed's rule; a core reboot that failed and only asks for the shard's
// unfreeze, in failed_unfreeze, holds the order no longer), the headnode
// first; the rest in a sliding window: the
// moment a reboot ends, the next one starts. Every server of the plan that
// is offline (Offline: down for any reason, not observed, or its reboot in
// flight, including reboots that ended as failed while their server is
// still down) counts against the concurrency.
//
// Next costs O(servers); NextView does the same on the part of the plan a
// pass needs, in O(reboots in flight).
func (c Config) Next(p Plan, obs Observations, now time.Time) (Plan, []Action) {
	v, acts := c.NextView(FullView(p), obs, now)
	return v.Plan, acts
}

// pass is one NextView's working state.
type pass struct {
	c   Config
	q   *Plan
	obs Observations
	now time.Time
	// offline counts the servers of the whole plan offline now (Offline),
	// kept up to date as reboots change step; dom counts them per failure
	// domain (nil without domain limits).
	offline int
	dom     *domainCount
	// done counts the reboots of the whole plan done but core ones (the
	// ramp's stage); hist counts them all by duration (the maintenance
	// windows' fit, Need).
	done int
	hist Hist
	// hold says why no reboot may start now, whatever the server (a
	// closed window, a failing blocking condition), "" if none;
	// holdOutput is the condition's output.
	hold, holdOutput string
	// failures counts the reboots of the whole plan with canceled_at set,
	// kept up to date in the pass (the failure budget).
	failures int
	acts     []Action
	// services names the first reboot in wait_services whose server is
	// still down, or back up with its services not, or in job whose job
	// the fleet shows not finished (queued, draining, running): the
	// plan's Waiting when nothing else is.
	services string
}

// enter moves r to step s now, keeping the counts.
func (ps *pass) enter(r *Reboot, s Step) {
	was := Offline(*r, ps.obs)
	r.Step, r.StepSince = s, tp(ps.now)
	is := Offline(*r, ps.obs)
	ps.offline += b2i(is) - b2i(was)
	if ps.dom != nil && is != was {
		ps.dom.add(r, b2i(is)-b2i(was))
	}
	if s == StepDone {
		ps.done += b2i(!r.Core)
		if d, ok := took(*r); ok {
			ps.hist = ps.hist.add(d, 1)
		}
	}
}

// limit is the concurrency in force: the ramp's stage, or Concurrency.
func (ps *pass) limit() int { return RampLimit(ps.q.Ramp, ps.q.Concurrency, ps.done) }

// concurrencyWord names the limit in force for a person.
func (ps *pass) concurrencyWord() string {
	if l := ps.limit(); l < ps.q.Concurrency {
		return fmt.Sprintf("canary ramp %d (until %d more reboot(s) are done), concurrency %d", l, rampLeft(ps.q.Ramp, ps.done), ps.q.Concurrency)
	}
	return fmt.Sprintf("concurrency %d", ps.q.Concurrency)
}

// rampLeft is how many more reboots must be done to leave the ramp's
// current stage.
func rampLeft(ramp []int, done int) int {
	sum := 0
	for _, n := range ramp {
		sum += n
		if done < sum {
			return sum - done
		}
	}
	return 0
}

// windowHold says why the maintenance windows hold the plan now ("" if
// they do not): closed, or closing too soon for a reboot of the length
// Need gives, or never open long enough.
func (ps *pass) windowHold() string {
	w, now := ps.q.Windows, ps.now
	if w.Empty() {
		return ""
	}
	need, why := needAt(w, ps.hist, now)
	loc, err := w.Location()
	if err != nil {
		return "waiting: the maintenance windows cannot be read: " + err.Error()
	}
	at := func(t time.Time) string { return t.In(loc).Format("Mon 2006-01-02 15:04 MST") }
	open, closes, err := w.Open(now)
	if err != nil {
		return "waiting: the maintenance windows cannot be read: " + err.Error()
	}
	if open && !now.Add(need).After(closes) {
		return ""
	}
	next, ok, err := nextOpen(w, now, need)
	switch {
	case err != nil:
		return "waiting: the maintenance windows cannot be read: " + err.Error()
	case !ok:
		return fmt.Sprintf("waiting: no maintenance window is open for %s (%s) in the next 400 days: no reboot can start; lengthen the windows or set windows expect",
			need.Round(time.Second), why)
	case !open:
		return "waiting: outside the maintenance windows until " + at(next)
	}
	return fmt.Sprintf("waiting: the maintenance window closes at %s, too soon for a reboot of %s (%s); next window: %s",
		at(closes), need.Round(time.Second), why, at(next))
}

// setHold decides whether the plan is held, whatever the server: by the
// maintenance windows (windowHold), or by a blocking condition that
// failed, is missing or stale.
func (ps *pass) setHold() {
	q, now := ps.q, ps.now
	ps.hold, ps.holdOutput = ps.windowHold(), ""
	if ps.hold != "" {
		return
	}
	for _, c := range q.Conditions {
		res, ok := ps.obs.Conditions[c.Name]
		switch {
		case !ok:
			ps.hold = fmt.Sprintf("waiting: blocking condition %s has not been checked", c.Name)
		case now.Sub(res.At) > ps.c.ConditionMaxAge:
			ps.hold = fmt.Sprintf("waiting: blocking condition %s was last checked %s ago (at most %s)", c.Name,
				now.Sub(res.At).Round(time.Second), ps.c.ConditionMaxAge)
		case !res.OK:
			ps.hold = fmt.Sprintf("waiting: blocking condition %s fails (checked %s ago)", c.Name, max(now.Sub(res.At), 0).Round(time.Second))
			ps.holdOutput = CleanOutput(res.Output)
		default:
			continue
		}
		return
	}
}

// stopped says why no job of the plan may be created now whatever the
// limits ("" if one may): the plan is not running, or its failures are
// over the budget.
func (ps *pass) stopped() string {
	switch {
	case ps.q.State != StateRunning:
		return "the plan is " + string(ps.q.State)
	case ps.failures > ps.q.FailureBudget:
		return fmt.Sprintf("%d reboot(s) failed, failure budget %d", ps.failures, ps.q.FailureBudget)
	}
	return ""
}

// mayStart reports whether advancing r may create its job: it waits for
// the headnode, the shard or the limits, or its job was never shown.
func mayStart(r Reboot, obs Observations) bool {
	switch r.Step {
	case StepWaitHead, StepFreeze:
		return true
	case StepJob:
		return !r.JobSeen && !obs.Jobs[r.JobUUID].Exists
	}
	return false
}

// ended reports whether no job of the plan will ever be created again:
// it is canceled or ended, or over its failure budget (it ends as failed
// in this pass).
func (ps *pass) ended() bool {
	return ps.q.State.Finished() || ps.q.State == StateRunning && ps.failures > ps.q.FailureBudget
}

// advance moves reboot i through every step whose condition holds now.
func (ps *pass) advance(i int) {
	c, q, obs, now := ps.c, ps.q, ps.obs, ps.now
	r := &q.Reboots[i]
	enter := func(s Step) { ps.enter(r, s) }
	fail := func(msg string) {
		if r.CanceledAt == nil {
			ps.failures++
		}
		r.CanceledAt, r.Error = tp(now), msg
		enter(StepFailed)
		if r.Frozen {
			enter(StepFailFreeze)
		}
	}
	wait := func(msg string) {
		if q.Waiting == "" {
			q.Waiting = msg
		}
	}
	// mayCreate: a job is the real start of a reboot, so the limit must
	// hold when it is created (first time, after the shard freeze or the
	// headnode wait, or again after a crash), not only when the reboot was
	// decided: other servers may have gone down since. A stopped, canceled
	// or ended plan creates none.
	mayCreate := func() bool {
		if why := ps.stopped(); why != "" {
			wait("waiting: " + why + "; reboot job of " + r.ServerHostname + " not created")
			return false
		}
		if ps.hold != "" {
			q.Waiting, q.WaitingOutput = ps.hold+"; reboot job of "+r.ServerHostname+" not created yet", ps.holdOutput
			return false
		}
		self := Offline(*r, obs)
		if others := ps.offline - b2i(self); others >= ps.limit() {
			q.Waiting = fmt.Sprintf("waiting: reboot job of %s not created yet, %d other server(s) offline, %s",
				r.ServerHostname, others, ps.concurrencyWord())
			return false
		}
		if msg := ps.dom.full(r, self); msg != "" {
			q.Waiting = msg + "; reboot job of " + r.ServerHostname + " not created yet"
			return false
		}
		return true
	}
	cancelJob := func(msg string) {
		if r.CanceledAt == nil {
			ps.failures++
		}
		r.CanceledAt, r.Error = tp(now), msg
		enter(StepCancelJob) // the cancel action comes from that step
	}
	since := func() time.Duration {
		if r.StepSince == nil {
			return 0
		}
		return now.Sub(*r.StepSince)
	}
	createJob := func() {
		enter(StepJob) // (before the job UUID: held until now, not offline)
		r.JobUUID, r.JobCreatedAt, r.ShowFrom = JobUUID(*q, r.ServerUUID), tp(now), nil
		if !q.DryRun {
			if r.AskedAt == nil {
				r.AskedAt = tp(now)
			}
			ps.acts = append(ps.acts, c.createJob(q, r))
		}
	}
	if j, ok := obs.Jobs[r.JobUUID]; ok && r.JobUUID != "" {
		r.Phases = r.Phases.merge(j.Phases)
	}
	// A step (or a drain) that began after now: the clock stepped back
	// since. It counts from now, so that its timeout runs out at most its
	// length after the step back, not once the clock has caught up with
	// what it lost (a day back kept a refused job waiting a day: issue 38,
	// C).
	if r.StepSince != nil && r.StepSince.After(now) {
		r.StepSince = tp(now)
	}
	if r.DrainSince != nil && r.DrainSince.After(now) {
		r.DrainSince = tp(now)
	}
	if r.AskedAt != nil && r.AskedAt.After(now) {
		r.AskedAt = tp(now) // a job asked for: JobTimeout of asking, likewise
	}
	if r.JobCreatedAt != nil && r.JobCreatedAt.After(now) {
		r.JobCreatedAt = tp(now) // and ShowTimeout
	}
	if r.ShowFrom != nil && r.ShowFrom.After(now) {
		r.ShowFrom = tp(now)
	}
	created := false // a create-job action was added in this call
	srv, ok := obs.Servers[r.ServerUUID]
	if !ok {
		srv = ServerObs{Down: true} // nothing known: not up
	}
	for guard := 0; guard < 8; guard++ {
		switch r.Step {
		case StepWaitHead:
			// Held before its job could start. A job asked for before
			// (then lost, and released here) that turns up after all is
			// followed from now on.
			if r.JobUUID != "" && obs.Jobs[r.JobUUID].Exists {
				r.AskedAt = nil
				enter(StepJob)
				continue
			}
			headOK := r.Headnode || !obs.Headnode || obs.HeadnodeServicesUp || q.DryRun
			primary := obs.ShardPrimary == r.ServerUUID && !q.DryRun
			if r.Frozen {
				// It froze the shard and was held: the shard never stays
				// frozen while no job of it can start. A job asked for
				// and taken for lost (the fleet refuses it, or never got
				// it) unfreezes the shard too before it is asked for
				// again, so a refusal that lasts never keeps the shard
				// frozen with no job longer than two ShowTimeouts (the
				// asks again, then the wait after the last, counted
				// from the first pass after it: ShowFrom) and three
				// passes.
				switch {
				case !obs.ShardFrozen:
					r.Frozen = false
					continue
				case r.JobUUID == "" && headOK && primary && mayCreate():
					createJob()
					created = true
					continue
				}
				ps.acts = append(ps.acts, Action{Kind: ActionUnfreeze, Server: r.ServerUUID, PlanUUID: q.UUID})
				wait("waiting: reboot of " + r.ServerHostname + " is held; unfreezing the database shard meanwhile")
				break
			}
			if ps.ended() {
				r.Error = "not started: " + ps.stopped()
				enter(StepReleased)
				break
			}
			if r.AskedAt != nil && now.Sub(*r.AskedAt) >= c.JobTimeout {
				// Asked for again and again, never shown: the fleet
				// refuses it (or loses it). Give it up: it never started,
				// so it is no failure, but the plan cannot end complete.
				r.Error = fmt.Sprintf("not started: the fleet never showed its reboot job in %s after the executor first decided to ask for it (%s): the fleet refused, lost or collected it unseen, or the executor's calls never reached the fleet (a pass that ran out of time or was stopped before them); the executor's log says which",
					c.JobTimeout, r.AskedAt.UTC().Format(time.RFC3339))
				enter(StepReleased)
				break
			}
			if !headOK {
				if since() >= c.ServicesTimeout {
					fail("headnode services not up within " + c.ServicesTimeout.String())
					continue
				}
				wait(fmt.Sprintf("waiting: reboot of %s waits for the headnode's services (for %s, at most %s)",
					r.ServerHostname, since().Round(time.Second), c.ServicesTimeout))
				break
			}
			if !q.DryRun && !mayCreate() {
				r.AskedAt = nil // held by the limits: not the fleet's refusal
				break           // never freeze the shard before the job can start
			}
			if primary {
				r.Frozen = true
				enter(StepFreeze)
				continue
			}
			createJob()
			created = !q.DryRun
			continue
		case StepFreeze:
			switch {
			case !mayCreate():
				// Held after the freeze was asked for: release it, and
				// freeze again when the job can start.
				enter(StepWaitHead)
				continue
			case obs.ShardFrozen:
				createJob()
				created = true
				continue
			case since() >= c.DrainTimeout:
				fail("database shard not frozen within " + c.DrainTimeout.String())
				continue
			default:
				ps.acts = append(ps.acts, Action{Kind: ActionFreeze, Server: r.ServerUUID, PlanUUID: q.UUID})
				wait("waiting: freezing the database shard for the reboot of " + r.ServerHostname)
			}
		case StepJob:
			if q.DryRun {
				r.StartedAt, r.FinishedAt = tp(now), tp(now)
				enter(StepServices)
				continue
			}
			j := obs.Jobs[r.JobUUID]
			if j.Exists {
				r.JobSeen, r.AskedAt, r.ShowFrom = true, nil, nil
			}
			if j.Started && r.StartedAt == nil {
				r.StartedAt = tp(orNow(j.StartedAt, now))
			}
			if j.Started && r.DrainSince == nil {
				r.DrainSince = tp(now) // the executor's clock, not the fleet's
			}
			switch {
			case j.Failed || j.Cancelled:
				msg := "reboot job failed"
				if j.Error != "" {
					msg += ": " + j.Error
				}
				fail(msg)
				continue
			case j.Finished:
				r.FinishedAt = tp(orNow(j.FinishedAt, now))
				enter(StepServices)
				continue
			case !j.Exists && r.JobSeen:
				// Seen once, gone now: the fleet collected it after it
				// ended. Never create it again (it may have rebooted the
				// server); wait for the services to tell.
				r.FinishedAt = tp(now)
				enter(StepServices)
				continue
			case !j.Exists && !created && !(r.AskedAt != nil && now.Sub(*r.AskedAt) >= c.JobTimeout) &&
				!(r.Frozen && since() >= c.ShowTimeout) && mayCreate():
				// Never seen, and the limits hold: ask again (same UUID,
				// no second job), until JobTimeout after the first ask
				// (AskedAt); a frozen primary only for ShowTimeout, then
				// its job is taken for lost below and the shard unfrozen.
				r.JobCreatedAt, r.ShowFrom = tp(now), nil
				ps.acts = append(ps.acts, c.createJob(q, r))
				wait("waiting: reboot job of " + r.ServerHostname + " asked for again (the fleet does not show it)")
			case !j.Exists && !created:
				// Never seen, and not asked again. Until ShowTimeout
				// after the last ask's calls the job may run (the fleet
				// shows it late): it stays here, counted offline,
				// whatever the plan's state. The clock starts at the
				// first pass after the ask (ShowFrom), when its calls
				// are known to have returned, not at the decision
				// (JobCreatedAt): a pass's calls may take long (1,536
				// of them at 50 % of 100,000 servers). After it, it is
				// taken for lost (never
				// created: an executor killed between save and act, a
				// CreateJob error or refusal): the reboot has not
				// started, so it is no failure and its JobTimeout does
				// not run while it is held; it waits in wait_headnode and
				// is asked for again (same UUID) when the limits allow,
				// or released once JobTimeout of asking went by.
				if r.ShowFrom == nil && (r.JobCreatedAt == nil || now.After(*r.JobCreatedAt)) {
					r.ShowFrom = tp(now) // a later pass than the ask's
				}
				if r.ShowFrom == nil || now.Sub(*r.ShowFrom) < c.ShowTimeout {
					wait(fmt.Sprintf("waiting: reboot job of %s asked for, not shown by the fleet yet (counted offline, for at most %s after the ask)",
						r.ServerHostname, c.ShowTimeout))
					break
				}
				r.ShowFrom = nil
				enter(StepWaitHead)
				continue
			case j.Started && !j.Drained && r.DrainSince != nil && now.Sub(*r.DrainSince) >= c.DrainTimeout:
				cancelJob("server not drained within " + c.DrainTimeout.String())
				continue
			case since() >= c.JobTimeout:
				msg := "reboot job not finished within " + c.JobTimeout.String()
				if j.Error != "" {
					msg += ": " + j.Error // what the job is stuck on, e.g. the BMC refusing the password
				}
				cancelJob(msg)
				continue
			case j.Exists && ps.services == "":
				// Shown by the fleet, not finished: in flight, holding
				// its slot until JobTimeout; named if nothing else holds
				// the plan.
				ps.services = jobWaiting(r, j, since(), now, c)
			}
		case StepCancelJob:
			// The job may still reboot the server: it stays offline (in
			// flight) until the fleet says the job ended.
			j := obs.Jobs[r.JobUUID]
			if !j.Exists || j.Finished || j.Failed || j.Cancelled {
				enter(StepFailed)
				if r.Frozen {
					enter(StepFailFreeze)
				}
				continue
			}
			ps.acts = append(ps.acts, Action{Kind: ActionCancelJob, Server: r.ServerUUID, JobUUID: r.JobUUID, PlanUUID: q.UUID})
		case StepServices:
			switch {
			case q.DryRun || !srv.Down && srv.ServicesUp:
				r.OperationalAt = tp(now)
				if r.Frozen {
					enter(StepUnfreeze)
					continue
				}
				enter(StepDone)
			case since() >= c.ServicesTimeout:
				fail("services not up within " + c.ServicesTimeout.String())
				continue
			case !srv.Down && ps.services == "":
				// Back up, its services not (yet) reported up: named
				// if nothing else holds the plan (a fleet that never
				// sets ServicesUp holds it here for ServicesTimeout).
				ps.services = fmt.Sprintf("waiting: reboot of %s waits for its services: the server is up, services not up (for %s, at most %s, then the reboot fails)",
					r.ServerHostname, since().Round(time.Second), c.ServicesTimeout)
			case srv.Down && ps.services == "":
				// Its job finished, its server not back up (a boot that
				// hangs, a slow firmware update): in flight all the
				// same, named if nothing else holds the plan.
				ps.services = fmt.Sprintf("waiting: reboot of %s waits for its server to come back up after its power cycle (down for %s since its job finished, at most %s, then the reboot fails)",
					r.ServerHostname, since().Round(time.Second), c.ServicesTimeout)
			}
		case StepUnfreeze, StepFailFreeze:
			switch {
			case !obs.ShardFrozen:
				r.Frozen = false
				if r.Step == StepUnfreeze {
					enter(StepDone)
				} else {
					enter(StepFailed)
				}
			case r.Step == StepUnfreeze && !obs.ShardHealthy && since() >= c.ServicesTimeout:
				ps.failures++
				r.CanceledAt, r.Error = tp(now), "database shard not healthy within "+c.ServicesTimeout.String()+"; left frozen"
				enter(StepFailed)
			case r.Step == StepUnfreeze && since() >= c.ServicesTimeout:
				// Healthy, and still frozen: the fleet refuses (or
				// ignores) every unfreeze. The reboot fails; it goes on
				// asking in failed_unfreeze, where its server, up, no
				// longer holds a slot (Offline).
				fail(fmt.Sprintf("database shard (primary %s) still frozen %s after the reboot, although healthy: the fleet refused or ignored every unfreeze (the executor's log has its answers); the executor keeps asking each pass, and the plan cannot end before the shard is unfrozen: unfreeze it by hand if the fleet goes on refusing",
					r.ServerHostname, c.ServicesTimeout))
				continue
			case r.Step == StepFailFreeze:
				ps.acts = append(ps.acts, Action{Kind: ActionUnfreeze, Server: r.ServerUUID, PlanUUID: q.UUID})
				wait(fmt.Sprintf("waiting: database shard still frozen by the failed reboot of %s (its primary); asking the fleet to unfreeze it each pass (for %s): unfreeze it by hand if the fleet goes on refusing",
					r.ServerHostname, since().Round(time.Second)))
			case obs.ShardHealthy:
				ps.acts = append(ps.acts, Action{Kind: ActionUnfreeze, Server: r.ServerUUID, PlanUUID: q.UUID})
				wait(fmt.Sprintf("waiting: unfreezing the database shard after the reboot of %s (its primary; frozen for %s since its services came up, the reboot fails at %s)",
					r.ServerHostname, since().Round(time.Second), c.ServicesTimeout))
			default:
				wait(fmt.Sprintf("waiting: database shard not healthy after the reboot of %s (its primary; for %s, at most %s, then it is left frozen for a person to look at)",
					r.ServerHostname, since().Round(time.Second), c.ServicesTimeout))
			}
		}
		break
	}
}

func (c Config) createJob(q *Plan, r *Reboot) Action {
	return Action{Kind: ActionCreateJob, Server: r.ServerUUID, JobUUID: r.JobUUID, PlanUUID: q.UUID, Drain: true}
}

func tp(t time.Time) *time.Time { return &t }

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
