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
