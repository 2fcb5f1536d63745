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

// TestReview37_HeaderReadOfEndedPlanKeepsCaches (review of issue 37,
// round 6, the per-plan caches): round 5 made Get, List and GetView
// forget a plan they read ended, and Unfinished evict what the index no
// longer names. GetState, GetHead and Heads also read a plan's header and
// see it ended, but keep every cache of it: the member map (one entry per
// server: 100,000 at scale), the pages of the last view and the known
// header. A process that watches plans with GetState/GetHead/Heads (what
// a watcher or a listing polls) and never calls Unfinished (only an
// executor does) keeps the caches of every plan it ever viewed, for good.
func TestReview37_HeaderReadOfEndedPlanKeepsCaches(t *testing.T) {
	ctx := context.Background()
	pre := prefix(t)
	clk := fake.NewClock(time.Time{})
	const uuid = "watched"
	require.NoError(t, NewStore(newClient(t), pre).Create(ctx, runningPlan(t, uuid, fleetOf(clk, uuid, 30, "").Servers(), 2, clk.Now())))

	s := NewStore(newClient(t), pre)
	_, err := s.GetView(ctx, uuid) // while it runs: cached
	require.NoError(t, err)
	_, err = plan.Command(ctx, NewStore(newClient(t), pre), uuid, plan.Cancel) // ended elsewhere
	require.NoError(t, err)

	st, err := s.GetState(ctx, uuid)
	require.NoError(t, err)
	require.Equal(t, plan.StateCanceled, st)
	hv, err := s.GetHead(ctx, uuid)
	require.NoError(t, err)
	require.False(t, hv.Unfinished(), "the store read the plan ended")
	_, err = s.Heads(ctx)
	require.NoError(t, err)

	s.cache.mu.Lock()
	cached := s.cachedLocked()
	s.cache.mu.Unlock()
	assert.Empty(t, cached, "caches of a plan the store read ended")
}
