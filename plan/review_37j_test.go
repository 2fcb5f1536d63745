package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_DryRunClearedOverlaps (issue 37 round 8): the resume check
// (checkResumedTx, CheckResumed) runs only when a write takes a plan from
// ended to unfinished. A dry-run plan blocks nothing (CheckOthers skips
// it), so a real plan may be created over its servers; an Edit that then
// clears DryRun on the unfinished dry-run plan is a write that makes it
// hold servers again, and nothing checks it: two unfinished real plans
// over the same servers. Ground truth: the stored plans, read back.
func TestReview37_DryRunClearedOverlaps(t *testing.T) {
	for sname, s := range resumeStores(t) {
		t.Run(sname, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			servers := resumeServers(clk, 6)
			dry, _, err := plan.Create(servers, plan.CreateOptions{UUID: "dry", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(2), CreatedAt: clk.Now(), DryRun: true})
			require.NoError(t, err)
			dry, err = plan.Run(dry)
			require.NoError(t, err)
			require.NoError(t, s.Create(ctx, dry))
			require.NoError(t, s.Create(ctx, runningPlanOf(t, "real", servers[3:], clk.Now())), "a dry-run plan blocks nothing")

			_, err = plan.Edit(ctx, s, "dry", func(p plan.Plan) (plan.Plan, error) {
				p.DryRun = false
				return p, nil
			})
			assert.ErrorIs(t, err, plan.ErrServerInPlan, "clearing DryRun over another plan's servers")
			plans, lerr := s.List(ctx)
			require.NoError(t, lerr)
			var real []string
			for _, p := range plans {
				if p.Unfinished() && !p.DryRun {
					real = append(real, p.UUID)
				}
			}
			assert.Equal(t, []string{"real"}, real, "ground truth: the unfinished real plans stored")
		})
	}
}
