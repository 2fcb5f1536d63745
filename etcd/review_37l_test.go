package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_PutViewDropsStoredInFlight (issue 37 round 10, etcd): a
// PutView whose view does not load the stored in-flight reboot, with an
// Index that no longer names it in flight (counted failed) and the plan
// canceled, passes View.Check (it only checks the loaded reboots and the
// new index) and is written: the header says the plan ended, the
// unfinished index drops it, and Create accepts a new plan over the server
// whose job still runs. The page still says the reboot is in flight: a
// fresh store's Get shows two unfinished real plans holding one server.
func TestReview37_PutViewDropsStoredInFlight(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 6, "").Servers()
	s := NewStore(newClient(t), pre)
	r := runningPlan(t, "r", servers[:3], 2, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	h, err := s.GetHead(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, h.Index.InFlight)
	v := plan.View{Plan: h.Plan, Index: h.Index, Pos: []int{}}
	v.State = plan.StateCanceled
	v.Index.InFlight = nil
	v.Index.Failed++
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlan(t, "q", servers[:1], 2, clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view dropping the stored in-flight reboot (%v) and then a plan over its server (%v): one must be refused", perr, cerr)

	truth := NewStore(newClient(t), pre)
	gr, err := truth.Get(ctx, "r")
	require.NoError(t, err)
	q, qerr := truth.Get(ctx, "q")
	held := qerr == nil && q.Unfinished() && !q.DryRun
	assert.False(t, gr.Unfinished() && gr.Reboots[0].Step.InFlight() && held,
		"ground truth: %s has its reboot in flight in unfinished plan r and is held by plan q", servers[0].UUID)
}
