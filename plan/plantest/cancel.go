package plantest

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// ended reports whether the job is observed ended.
func ended(j plan.JobObs) bool { return j.Finished || j.Failed || j.Cancelled }

// checkCancel checks CancelJob: the job of the reboot at k2, created and
// cancelled, stays observed until it is reported ended (within an hour)
// and an hour after; CancelJob of the finished job of the reboot at k1
// keeps it observed, ended.
func checkCancel(ctx context.Context, t testing.TB, f Fleet, p plan.Plan, k1, k2 int) {
	t.Helper()
	observe := func(what string) plan.Observations {
		t.Helper()
		o, err := f.Fleet.Observe(ctx, p)
		if err != nil {
			t.Fatalf("Observe (%s): %v", what, err)
		}
		return o
	}
	done := p.Reboots[k1].JobUUID
	if err := f.Fleet.CancelJob(ctx, plan.Action{Kind: plan.ActionCancelJob, Server: p.Reboots[k1].ServerUUID, JobUUID: done, PlanUUID: p.UUID}); err != nil {
		t.Errorf("CancelJob of a job that finished: %v, want success (an executor that resumes cancels a job that may have finished meanwhile)", err)
	}
	if j := observe("after CancelJob of a finished job").Jobs[done]; !j.Exists || !ended(j) {
		t.Errorf("after CancelJob of the finished job %s, the job observed is %+v; want it kept, ended", done, j)
	}

	srv := p.Reboots[k2].ServerUUID
	job := plan.JobUUID(p, srv)
	p.Reboots[k2].JobUUID = job
	a := plan.Action{Kind: plan.ActionCreateJob, Server: srv, JobUUID: job, PlanUUID: p.UUID, Drain: true}
	if err := f.Fleet.CreateJob(ctx, a); err != nil {
		t.Fatalf("CreateJob of %s's job: %v", srv, err)
	}
	if j := observe("after CreateJob, before CancelJob").Jobs[job]; !j.Exists {
		t.Fatalf("Observe after CreateJob: job %s not observed", job)
	}
	a.Kind = plan.ActionCancelJob
	if err := f.Fleet.CancelJob(ctx, a); err != nil {
		t.Errorf("CancelJob: %v", err)
	}
	var j plan.JobObs
	for i := 0; i < 360; i++ {
		j = observe("after CancelJob").Jobs[job]
		if !j.Exists {
			t.Errorf("job %s is no longer observed %v after its CancelJob, not reported ended before: the Executor takes it for ended (the server no longer counts offline) while it may still reboot the server; a fleet keeps every job it created, cancelled or not, for RetainJobs (%v)",
				job, time.Duration(i)*10*time.Second, plan.RetainJobs)
			return
		}
		if ended(j) {
			break
		}
		f.Advance(10 * time.Second)
	}
	if !ended(j) {
		t.Errorf("job %s, cancelled, is not reported ended (Finished, Failed or Cancelled) an hour later: %+v; the Executor counts its server offline until it is", job, j)
		return
	}
	f.Advance(time.Hour)
	if late := observe("an hour after the cancelled job ended").Jobs[job]; !late.Exists || !ended(late) {
		t.Errorf("an hour after the cancelled job %s ended, the job observed is %+v; a fleet keeps jobs for RetainJobs (%v)", job, late, plan.RetainJobs)
	}
}
