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

// TestReview37_PutViewStartedPastUnloaded (issue 37 round 11, etcd):
// CheckLoads asks only that the view load the stored in-flight reboots and
// the stored first pending one; the view's Index.Started may jump past
// pending reboots it never loaded (counted failed). PutView writes that
// index: the header says every reboot started while reboots 2 and 3 are
// pending in their page (never rebooted).
func TestReview37_PutViewStartedPastUnloaded(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 4, "").Servers()
	s := NewStore(newClient(t), pre)
	r := runningPlan(t, "r", servers, 2, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 1, v.Index.Started)
	v.Pos, v.Reboots = []int{0, 1}, []plan.Reboot{v.Reboots[0], v.Reboots[1]}
	v.Reboots[1].Step, v.Reboots[1].FinishedAt = plan.StepFailed, &at
	v.Index.Started, v.Index.Failed = 4, v.Index.Failed+3
	perr := s.PutView(ctx, v)
	if perr != nil {
		return
	}
	truth := NewStore(newClient(t), pre)
	gr, gerr := truth.Get(ctx, "r")
	gh, herr := truth.GetHead(ctx, "r")
	require.NoError(t, herr)
	require.NoError(t, gerr, "PutView accepted a view whose index starts reboots it did not load (header started %d), and the plan can no longer be read", gh.Index.Started)
	assert.Equal(t, plan.IndexOf(gr).Started, gh.Index.Started, "PutView accepted a view starting reboots it did not load: the header's index says started, the pages say pending")
}

// TestReview37_PutViewInFlightBackToPending (issue 37 round 11, etcd): a
// view that loads the stored in-flight reboot but sets it back to pending
// (JobUUID still set: no job ended) and cancels the plan is written, and
// Create accepts a plan over its server.
func TestReview37_PutViewInFlightBackToPending(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 4, "").Servers()
	s := NewStore(newClient(t), pre)
	r := runningPlan(t, "r", servers[:2], 2, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 0, v.Pos[0])
	v.Reboots[0].Step = plan.StepPending
	v.Index.Started, v.Index.InFlight = 0, nil
	v.State = plan.StateCanceled
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlan(t, "q", servers[:1], 2, clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view setting the in-flight reboot (job-1) back to pending (%v), then a plan over its server (%v): one must be refused", perr, cerr)
}
