package plantest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// Fleet is one fresh fleet under test.
type Fleet struct {
	// Fleet is the fleet.
	Fleet plan.Fleet
	// Servers are at least two of its servers, up, whose reboot jobs
	// succeed. The fleet is healthy: its headnode's services up if it
	// has one (plan.HeadnodeFleet), its database shard healthy and not
	// frozen if it has one (plan.ShardFleet).
	Servers []plan.Server
	// Advance lets d of time pass in the fleet (its jobs run meanwhile):
	// advance a fake clock, or run the fleet's workers for d.
	Advance func(d time.Duration)
	// ShardPrimary is the UUID of the server hosting the fleet's database
	// shard's primary, one of the first two Servers, if the fleet is a
	// plan.ShardFleet with a shard: FleetContract checks that Observe
	// reports it (Observations.ShardPrimary) and that the Executor freezes
	// the shard before it creates that server's job. Empty: the fleet has
	// no shard (a ShardFleet type may have none, as fake.NewFleet with an
	// empty primary), and only the freeze, unfreeze and health are checked.
	ShardPrimary string
	// Close, if set, is called when the check is done.
	Close func()
}

// NewFleet returns a fresh fleet (no jobs yet).
type NewFleet func() (Fleet, error)

// FleetContract checks the job contract the Executor relies on, through
// what the Executor sees (Observe, and for a plan.ViewFleet ObserveView of
// a full view and of a partial view of each reboot, as on a
// plan.ViewStore):
//
//   - CreateJob is idempotent per job UUID: creating a job again, while
//     it runs or after it finished, succeeds and creates no second job
//     (the job observed is the first one: it never goes back from
//     Finished, and its start is the first one's);
//   - jobs outlive the plan: a finished job is still observed, by its
//     UUID, an hour later, from the plan once it is done and from another
//     plan that names it (RetainJobs is a day);
//   - a job not created is not observed as existing;
//   - Observe (and ObserveView of a full view) of the healthy fleet
//     reports every server of the plan, and ObserveView of a partial view
//     the view's own server, in Observations.Servers, not Down, with
//     ServicesUp,
//     before any job and an hour after the job ended: a server missing
//     counts as offline (with Concurrency of them, no job starts and the
//     plan waits for good), and a fleet that leaves ServicesUp false
//     holds every reboot in wait_services for Config.ServicesTimeout,
//     then fails it;
//   - if the fleet is a plan.HeadnodeFleet whose HasHeadnode is true,
//     Observe (and ObserveView, of full and partial views) of the healthy
//     fleet reports HeadnodeServicesUp, before any job and an hour after the job ended:
//     a fleet that leaves it false holds every reboot in wait_headnode
//     for Config.ServicesTimeout, then fails it;
//   - CancelJob keeps the job's record: the job cancelled is still
//     observed (Exists) right after the call and until it is reported
//     ended (Finished, Failed or Cancelled), which it must be within an
//     hour, and an hour after that (the Executor counts the server
//     offline until Observe reports the job ended, and takes a job it
//     no longer sees for one that ended: a fleet that forgets a job it
//     cancelled lets a job that may still reboot its server run outside
//     the concurrency); CancelJob of a job that finished succeeds and
//     keeps it observed, ended;
//   - if the fleet is a plan.ViewFleet, ObserveView of a view holding one
//     reboot sets Partial, observes no server and no job outside the view,
//     observes the view's own server as a full view does, and does not
//     list in Offline a server that is up;
//   - if the fleet is a plan.ShardFleet, Observe (and ObserveView, of
//     full and partial views) reports the healthy fleet's shard healthy
//     (ShardHealthy: the Executor unfreezes only a healthy shard), before
//     the freeze, and again within an hour of fleet time (the default
//     Config.ServicesTimeout, the Executor's wait for it) of the freeze
//     and of the unfreeze; FreezeShard, twice, makes it
//     report the shard frozen, and UnfreezeShard, twice, not frozen,
//     within a minute of fleet time (a shard left frozen after its
//     primary's reboot keeps that reboot failed_unfreeze and its plan
//     from ending);
//   - if Fleet.ShardPrimary is set, the fleet is a plan.ShardFleet,
//     Observe (and ObserveView, of full and partial views) of the fresh
//     fleet (checked first, before the kit's own jobs reboot servers
//     with the shard not frozen) reports that server in ShardPrimary,
//     and the Executor, running a plan over the
//     first two Servers (on a plan.ViewStore, plan.Views of a FileStore,
//     when the fleet is a plan.ViewFleet, so that it observes partial
//     views as in production), calls FreezeShard before it creates that
//     server's job (the calls the fleet received, recorded by the kit): a
//     fleet that leaves ShardPrimary empty has its primary rebooted with
//     the shard not frozen; the plan then ends within two hours with that
//     server's reboot done, the last shard call the fleet received an
//     UnfreezeShard, and the fleet no longer reporting the shard frozen
//     within a minute of fleet time.
//
// The jobs must drain and finish within an hour of fleet time (Advance is
// called in steps of ten seconds up to that; the kit's Executor runs with
// DrainTimeout and JobTimeout an hour).
func FleetContract(t testing.TB, newFleet NewFleet) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := newFleet()
	if err != nil {
		t.Fatalf("new fleet: %v", err)
	}
	if f.Close != nil {
		defer f.Close()
	}
	if len(f.Servers) < 2 || f.Advance == nil {
		t.Fatalf("plantest: a Fleet needs two servers and Advance (got %d servers, Advance set %v)", len(f.Servers), f.Advance != nil)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, _, err := plan.Create(f.Servers[:2], plan.CreateOptions{UUID: "plantest-fleet", Target: "plantest-target", Select: plan.SelectAll,
		Concurrency: plan.Count(1), FailureBudget: plan.Count(2), CreatedAt: at})
	if err != nil {
		t.Fatalf("plantest: create plan: %v", err)
	}
	if p, err = plan.Run(p); err != nil {
		t.Fatalf("plantest: run plan: %v", err)
	}
	s1, s2 := f.Servers[0].UUID, f.Servers[1].UUID
	k1 := slices.IndexFunc(p.Reboots, func(r plan.Reboot) bool { return r.ServerUUID == s1 })
	if k1 < 0 {
		t.Fatalf("plantest: server %s not in the plan", s1)
	}
	job := plan.JobUUID(p, s1)
	other := plan.JobUUID(p, s2)
	observe := func(what string, p plan.Plan) plan.Observations {
		t.Helper()
		o, err := f.Fleet.Observe(ctx, p)
		if err != nil {
			t.Fatalf("Observe (%s): %v", what, err)
		}
		return o
	}
	if o := observe("before any job", p); o.Jobs[job].Exists || o.Jobs[other].Exists {
		t.Errorf("Observe before any CreateJob reports a job: %+v", o.Jobs)
	}
	checkHeadnode(ctx, t, f.Fleet, p, "before any job")
	checkServers(ctx, t, f.Fleet, p, "before any job")
	// The named primary is checked first, on the fresh fleet: the kit's
	// own jobs below reboot servers with the shard not frozen, after
	// which a replicated shard may have failed over, truthfully.
	checkShardPrimary(ctx, t, f, at)
	a := plan.Action{Kind: plan.ActionCreateJob, Server: s1, JobUUID: job, PlanUUID: p.UUID, Drain: true}
	if err := f.Fleet.CreateJob(ctx, a); err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	p.Reboots[k1].JobUUID = job
	first := observe("after CreateJob", p).Jobs[job]
	if !first.Exists {
		t.Fatalf("Observe after CreateJob: job %s not observed", job)
	}
	f.Advance(10 * time.Second)
	if err := f.Fleet.CreateJob(ctx, a); err != nil {
		t.Errorf("CreateJob of a job that runs: %v, want success (idempotent: the executor re-creates after a crash)", err)
	}
	var done plan.JobObs
	for i := 0; i < 360; i++ {
		done = observe("while the job runs", p).Jobs[job]
		if !done.Exists {
			t.Fatalf("the job %s vanished while it ran", job)
		}
		if done.Finished || done.Failed || done.Cancelled {
			break
		}
		f.Advance(10 * time.Second)
	}
	if !done.Finished {
		t.Fatalf("the job did not finish within an hour: %+v", done)
	}
	if !first.StartedAt.IsZero() && !done.StartedAt.IsZero() && !done.StartedAt.Equal(first.StartedAt) {
		t.Errorf("the job's start moved from %v to %v: CreateJob started it again", first.StartedAt, done.StartedAt)
	}
	if err := f.Fleet.CreateJob(ctx, a); err != nil {
		t.Errorf("CreateJob of a finished job: %v, want success", err)
	}
	f.Advance(10 * time.Second)
	if again := observe("after CreateJob of a finished job", p).Jobs[job]; !again.Exists || !again.Finished {
		t.Errorf("after CreateJob of a finished job, the job observed is %+v: a second job was created (the server reboots twice)", again)
	}

	// Jobs outlive the plan.
	f.Advance(time.Hour)
	p.State = plan.StateComplete
	if late := observe("an hour later, plan done", p).Jobs[job]; !late.Exists || !late.Finished {
		t.Errorf("an hour after it finished, from the plan done, the job observed is %+v; a fleet keeps jobs for RetainJobs (%v)", late, plan.RetainJobs)
	}
	checkHeadnode(ctx, t, f.Fleet, p, "an hour after the job ended")
	checkServers(ctx, t, f.Fleet, p, "an hour after the job ended")
	q := p
	q.UUID = "plantest-other-plan"
	q.Reboots = slices.Clone(p.Reboots)
	q.State = plan.StateRunning
	if late := observe("from another plan", q).Jobs[job]; !late.Exists || !late.Finished {
		t.Errorf("from another plan naming it, the job observed is %+v; jobs are the fleet's, not the plan's", late)
	}
	if o := observe("job never created", p); o.Jobs[other].Exists {
		t.Errorf("job %s was never created, but is observed: %+v", other, o.Jobs[other])
	}

	p.State = plan.StateRunning
	if vf, ok := f.Fleet.(plan.ViewFleet); ok {
		checkView(ctx, t, vf, p, k1, job, s2)
	}
	k2 := slices.IndexFunc(p.Reboots, func(r plan.Reboot) bool { return r.ServerUUID == s2 })
	checkCancel(ctx, t, f, p, k1, k2)
	checkShard(ctx, t, f, p)
}

// checkView checks ObserveView: partial, the view's servers and jobs
// only (job, of the reboot at k1), the view's own server observed as the
// full view observes it, and s2, up, not offline.
func checkView(ctx context.Context, t testing.TB, vf plan.ViewFleet, p plan.Plan, k1 int, job, s2 string) {
	t.Helper()
	s1 := p.Reboots[k1].ServerUUID
	full := plan.FullView(p)
	fo, err := vf.ObserveView(ctx, full)
	if err != nil {
		t.Fatalf("ObserveView of a full view: %v", err)
	}
	o, err := vf.ObserveView(ctx, partialView(p, k1))
	if err != nil {
		t.Fatalf("ObserveView: %v", err)
	}
	switch s, ok := o.Servers[s1]; {
	case !ok:
		t.Errorf("ObserveView of a view of %s does not observe %s in Observations.Servers: the Executor counts a server missing as offline, and on a plan.ViewStore (a partial view each pass) no job starts while Concurrency servers are", s1, s1)
	case s.Down != fo.Servers[s1].Down || s.ServicesUp != fo.Servers[s1].ServicesUp:
		t.Errorf("ObserveView of a view of %s observes it %+v, but of the full view %+v: a partial view observes the view's servers as the full one does", s1, s, fo.Servers[s1])
	}
	if !o.Partial {
		t.Errorf("ObserveView did not set Partial: the executor would take the servers it left out as offline")
	}
	for id := range o.Servers {
		if id != s1 {
			t.Errorf("ObserveView of a view of %s observed server %s", s1, id)
		}
	}
	for id := range o.Jobs {
		if id != job {
			t.Errorf("ObserveView of a view holding job %s observed job %s", job, id)
		}
	}
	if !o.Jobs[job].Exists {
		t.Errorf("ObserveView did not observe the view's job %s", job)
	}
	if slices.Contains(o.Offline, s2) {
		t.Errorf("ObserveView lists %s offline, but it is up and has no job", s2)
	}
}
