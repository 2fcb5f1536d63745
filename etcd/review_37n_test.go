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

// TestReview37n_PutViewReleasesRunningJob (issue 37 round 12, etcd): a
// view releasing the stored in-flight reboot (StepJob, job-1 seen) and
// ending the plan is written (CheckStepForward refuses only a move back
// to pending); Create then accepts a plan over its server while job-1 runs.
func TestReview37n_PutViewReleasesRunningJob(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 4, "").Servers()
	s := NewStore(newClient(t), pre)
	r := runningPlan(t, "r", servers[:1], 2, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].JobSeen, r.Reboots[0].StartedAt = plan.StepJob, "job-1", true, &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	v.Reboots[0].Step = plan.StepReleased
	v.Index.InFlight = nil
	v.Index.Released++
	v.State = plan.StateFailed
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlan(t, "q", servers[:1], 2, clk.Now()))
	truth := NewStore(newClient(t), pre)
	g, err := truth.Get(ctx, "r")
	require.NoError(t, err)
	assert.True(t, perr != nil || cerr != nil, "a view releasing reboot 0 (job-1 running) was written (fresh read: %q, plan %q), then a plan over its server (%v)", g.Reboots[0].Step, g.State, cerr)
}
