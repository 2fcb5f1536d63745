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

// TestReview37_DryRunSetWithRebootInFlight (issue 37 round 9, etcd): the
// converse of plan.NewlyHolds. A Command setting DryRun on an unfinished
// real plan whose reboot is in flight (its job created) makes it block
// nothing at once (plan.CheckOthers skips dry-run plans), so Create
// accepts a new plan over the server whose job still runs. Ground truth:
// a fresh store's reads of both plans.
func TestReview37_DryRunSetWithRebootInFlight(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	servers := fleetOf(clk, "s", 6, "").Servers()
	s := NewStore(newClient(t), pre)
	r := runningPlan(t, "r", servers[:3], 2, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	_, derr := plan.Command(ctx, s, "r", func(p plan.Plan) (plan.Plan, error) {
		p.DryRun = true
		return p, nil
	})
	cerr := s.Create(ctx, runningPlan(t, "q", servers[:1], 2, clk.Now()))
	assert.True(t, derr != nil || cerr != nil, "setting DryRun (%v) and then a plan over the server whose job runs (%v): one must be refused", derr, cerr)

	truth := NewStore(newClient(t), pre)
	gr, err := truth.Get(ctx, "r")
	require.NoError(t, err)
	inFlight := gr.Reboots[0].Step.InFlight()
	q, qerr := truth.Get(ctx, "q")
	held := qerr == nil && q.Unfinished() && !q.DryRun
	assert.False(t, inFlight && held, "ground truth: %s has its reboot in flight in plan r and is held by plan q", servers[0].UUID)
}
