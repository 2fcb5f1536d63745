package fake

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/plan"
	"pgregory.net/rapid"
)

// TestFleetTruthJobEndingAtCreation pins the oracle bug behind the plan
// state machine's 7 % flake (issue 23): a failing job with no queue and no
// drain ends at the instant it is created, so a second job created at that
// same instant must not count the first server as offline. The per-instant
// cache used to add every new job's server to the offline set.
func TestFleetTruthJobEndingAtCreation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	f := NewFleet(func() time.Time { return now }, "",
		FleetServer{UUID: "u00", Hostname: "cn00", FailJob: true, Boot: time.Second},
		FleetServer{UUID: "u01", Hostname: "cn01", FailJob: true, Boot: time.Second})
	ctx := context.Background()
	for _, id := range []string{"u00", "u01"} {
		if err := f.CreateJob(ctx, plan.Action{Kind: plan.ActionCreateJob, Server: id, JobUUID: "job-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	starts := f.Starts()
	if len(starts) != 2 {
		t.Fatalf("got %d starts, want 2", len(starts))
	}
	if len(starts[1].Offline) != 0 {
		t.Fatalf("u01's start counts %v offline, but u00's job ended at the instant it was created", starts[1].Offline)
	}
}

// TestFleetTruthCacheExact checks the per-instant ground-truth cache that
// CreateJob keeps against a recount from the jobs and servers, in random
// histories where many things happen at one instant: jobs created,
// cancelled, ending at once, servers going down and up, the clock standing
// still, moving on or going back.
func TestFleetTruthCacheExact(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := t0
		n := rapid.IntRange(1, 5).Draw(t, "servers")
		d := func(label string) time.Duration {
			return time.Duration(rapid.IntRange(0, 2).Draw(t, label)) * time.Second
		}
		var servers []FleetServer
		for i := range n {
			servers = append(servers, FleetServer{
				UUID: fmt.Sprintf("u%02d", i), Hostname: fmt.Sprintf("cn%02d", i),
				Queue: d("queue"), Drain: d("drain"), Shutdown: d("shutdown"), Boot: d("boot"), Services: d("services"),
				FailJob: rapid.Bool().Draw(t, "fail"),
			})
		}
		f := NewFleet(func() time.Time { return now }, "", servers...)
		ctx := context.Background()
		var jobs []plan.Action
		for step := range rapid.IntRange(1, 40).Draw(t, "steps") {
			server := fmt.Sprintf("u%02d", rapid.IntRange(0, n-1).Draw(t, "server"))
			switch rapid.IntRange(0, 4).Draw(t, "action") {
			case 0:
				now = now.Add(d("advance"))
			case 1:
				now = now.Add(-d("back"))
			case 2:
				a := plan.Action{Kind: plan.ActionCreateJob, Server: server, JobUUID: fmt.Sprintf("job-%d", step)}
				f.mu.Lock()
				var want []string
				for _, id := range f.offlineSet(now, true) {
					if id != server {
						want = append(want, id)
					}
				}
				f.mu.Unlock()
				if err := f.CreateJob(ctx, a); err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, a)
				starts := f.Starts()
				got := slices.Clone(starts[len(starts)-1].Offline)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: start of %s at %s lists %v offline, a recount says %v", step, server, now.Sub(t0), got, want)
				}
			case 3:
				if len(jobs) > 0 {
					a := jobs[rapid.IntRange(0, len(jobs)-1).Draw(t, "job")]
					a.Kind = plan.ActionCancelJob
					if err := f.CancelJob(ctx, a); err != nil {
						t.Fatal(err)
					}
				}
			case 4:
				f.SetDown(server, rapid.Bool().Draw(t, "down"))
			}
		}
	})
}
