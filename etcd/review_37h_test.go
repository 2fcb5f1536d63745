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

// TestReview37_PutOfEndedPlanRefused (review of issue 37, round 6, the
// per-plan caches): Put (plan.Store) compares the plan with what the
// store's last whole read kept (cache.loaded) and, when that is not the
// version given, reads the plan again with Get and takes cache.loaded
// after it. Get keeps nothing of a plan that ended and now forgets it
// (7ce8158), so for an ended plan cache.loaded is empty after Get and Put
// answers plan.ErrConflict for the version Get itself just returned, on
// every try: plan.Edit of an ended plan (a tool correcting a record of a
// finished plan) fails after 100 tries with a conflict nobody caused.
// Ground truth: a fresh store's Get.
func TestReview37_PutOfEndedPlanRefused(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "endedput"
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 30, "").Servers(), 2, clk.Now())))
	_, err := plan.Command(ctx, NewStore(newClient(t), pre), uuid, plan.Cancel)
	require.NoError(t, err)

	s := NewStore(newClient(t), pre)
	p, err := s.Get(ctx, uuid)
	require.NoError(t, err)
	require.False(t, (plan.View{Plan: p, Index: plan.IndexOf(p)}).Unfinished(), "the plan ended (canceled, nothing in flight)")

	p.Reboots[0].Error = "corrected by a tool"
	assert.NoError(t, s.Put(ctx, p), "Put with the version Get just returned, nobody wrote since")
	_, err = plan.Edit(ctx, s, uuid, func(p plan.Plan) (plan.Plan, error) {
		p.Reboots[1].Error = "corrected again"
		return p, nil
	})
	assert.NoError(t, err, "Edit of an ended plan")

	got, err := NewStore(newClient(t), pre).Get(ctx, uuid)
	require.NoError(t, err)
	assert.Equal(t, "corrected by a tool", got.Reboots[0].Error, "ground truth: the Put is stored")
	assert.Equal(t, "corrected again", got.Reboots[1].Error, "ground truth: the Edit is stored")
}
