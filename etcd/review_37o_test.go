package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37o_MaxInFlightWedgesPlan (issue 37, review round 13): a plan
// of more than MaxInFlight (100,000) servers (MaxServers is 200,000) whose
// concurrency lets MaxInFlight reboots be in flight, e.g. 50 % of 200,000:
// GetView then loads no pending reboot (viewPositions: pending =
// MaxInFlight - in flight = 0), and PutView refuses every view it gave
// (CheckLoads: the stored first pending reboot is not loaded,
// ErrViewIncomplete, the check added in round 10). No pass is ever saved
// again: a reboot whose job finished is never recorded past its job, the
// plan never ends, and the executor fails every pass. Ground truth: the
// store's own GetView, changed as a pass changes it (one job done), and
// a fresh read.
func TestReview37o_MaxInFlightWedgesPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("100,001 servers")
	}
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	n := MaxInFlight + 1
	servers := make([]plan.Server, n)
	for i := range servers {
		servers[i] = plan.Server{UUID: fmt.Sprintf("u%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1"}
	}
	p := runningPlan(t, "big", servers, n, clk.Now())
	at := clk.Now()
	for i := 0; i < MaxInFlight; i++ {
		r := &p.Reboots[i]
		r.Step, r.StepSince, r.JobUUID, r.JobSeen, r.StartedAt = plan.StepJob, &at, plan.JobUUID(p, r.ServerUUID), true, &at
	}
	pre := prefix(t)
	s := NewStore(newClient(t), pre)
	require.NoError(t, s.Create(ctx, p))

	v, err := s.GetView(ctx, "big")
	require.NoError(t, err)
	require.Len(t, v.Index.InFlight, MaxInFlight)
	require.Less(t, v.Index.Started, v.Index.Total, "a reboot is still pending")
	// The pass: reboot 0's job finished; it waits for its services.
	fin := at.Add(time.Minute)
	v.Reboots[0].Step, v.Reboots[0].StepSince, v.Reboots[0].FinishedAt = plan.StepServices, &fin, &fin
	perr := s.PutView(ctx, v)
	g, err := NewStore(newClient(t), pre).GetView(ctx, "big")
	require.NoError(t, err)
	assert.NoError(t, perr, "the store refused the view it gave, changed as a pass changes it")
	assert.Equal(t, plan.StepServices, g.Reboots[0].Step, "reboot 0's finished job was never recorded")
}

// hangingCancelFleet: the fleet's CancelJob of one server's job never
// answers (it returns only when the caller gives up), e.g. an API call
// stuck behind that server's dead BMC.
type hangingCancelFleet struct {
	*fake.Fleet
	server string
}

func (f hangingCancelFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if a.Server == f.server {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.Fleet.CancelJob(ctx, a)
}

// TestReview37o_HangingCallStarvesOtherPlans (issue 37, review round 13;
// liveness with the fault kept on): a leader's pass runs every unfinished
// plan in turn under one context (Executor.lead: one PassTimeout for the
// whole pass; Leadership.Pass), and a plan's pass takes its actions one
// after the other, cancels first. Plan "a"'s first server never drains,
// so its job is cancelled after DrainTimeout, and the fleet's CancelJob
// of it hangs for ever: every pass spends its whole time on that call,
// and plan "b", whose 20 servers share nothing with "a", is never passed
// again: in two hours most of its servers are never rebooted (nor are
// "a"'s others). Ground truth: the fake fleet's job creations.
func TestReview37o_HangingCallStarvesOtherPlans(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	fs := make([]fake.FleetServer, 24)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("h-u%05d", i), Hostname: fmt.Sprintf("h-cn%05d", i), Platform: "1",
			Queue: 5 * time.Second, Drain: 10 * time.Second, Shutdown: 5 * time.Second, Boot: time.Minute, Services: 20 * time.Second}
	}
	fs[0].Drain = 1000 * time.Hour // never drains
	fleet := fake.NewFleet(clk.Now, "", fs...)
	servers := fleet.Servers()
	l, _ := lead(t, pre, "leader", 5)
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "a", servers[:4], 2, clk.Now())))
	require.NoError(t, l.Store.Create(ctx, runningPlan(t, "b", servers[4:], 2, clk.Now())))
	hf := hangingCancelFleet{fleet, fs[0].UUID}
	for i := 0; i < 120; i++ {
		// A pass bounded as the Executor bounds it (PassTimeout, here
		// shortened).
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = l.Pass(pctx, hf, cfg29, clk.Now, nil)
		cancel()
		clk.Advance(time.Minute)
	}
	created := fleet.JobsCreated()
	var never []string
	for _, s := range fs[1:] {
		if created[s.UUID] == 0 {
			never = append(never, s.Hostname)
		}
	}
	a, err := l.Store.Get(ctx, "a")
	require.NoError(t, err)
	b, err := l.Store.Get(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, plan.StepCancelJob, a.Reboots[0].Step)
	assert.Empty(t, never, "in two hours, while one CancelJob of plan a hangs, these servers were never rebooted:\n%s\n%s", plan.Table(a), plan.Table(b))
}
