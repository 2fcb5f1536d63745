package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37s_TwoHangingPlansStarveSlowPlan (issue 37, review round 17):
// Turns' doc promises "every plan that acts and whose pass fits half of
// the pass moves at least once every as many passes as there are plans
// that act cut short" (and the fix of round 16: "a call that fits half of
// the pass answers in its plan's long turn"). Three running plans share
// the executor's 400 ms pass: A and C each have one server whose BMC
// never answers a job creation (it honours its context), B one server
// whose job creation answers in 150 ms: B's pass fits half of the pass.
// In B's long turn A and C use up the first half (each call has all of
// its plan's share, A and C are cut short), and B's long turn starts with
// 200 ms left; but each call of a shared pass has at most half of what is
// left of the pass (Executor.call, sharedPassKey): 100 ms, and B's call
// runs out. In A's and C's long turns B shares the first half with the
// other hanging plan: 100 ms at most again. B's server is never rebooted,
// pass after pass, while its fleet answers every call in 150 ms. Ground
// truth: the fake fleet's job creations.
func TestReview37s_TwoHangingPlansStarveSlowPlan(t *testing.T) {
	mk := func(uuid string, took time.Duration) (*world, *plan.Executor, string) {
		o := opts()
		o.UUID = uuid
		o.Concurrency = plan.Count(1)
		fs := fleetServers(0, 1, time.Minute)
		w := newWorld(t, fs, "", o)
		return w, &plan.Executor{Fleet: slowOneFleet{w.fleet, fs[0].UUID, took}, Store: w.store, Now: w.clk.Now}, fs[0].UUID
	}
	a, exA, _ := mk("review37s-hang-a", time.Hour)
	b, exB, bServer := mk("review37s-hang-b", 150*time.Millisecond)
	c, exC, _ := mk("review37s-hang-c", time.Hour)
	ex := map[string]*plan.Executor{"review37s-hang-a": exA, "review37s-hang-b": exB, "review37s-hang-c": exC}
	turns := []plan.Turn{{UUID: "review37s-hang-a", Acts: true}, {UUID: "review37s-hang-b", Acts: true}, {UUID: "review37s-hang-c", Acts: true}}
	var tr plan.Turns
	var lastErrs []error
	for pass := 0; pass < 6 && b.fleet.JobsCreated()[bServer] == 0; pass++ {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		errs, err := tr.Run(ctx, turns, nil, func(ctx context.Context, uuid string) error {
			_, err := ex[uuid].Pass(ctx, uuid)
			return err
		})
		cancel()
		require.NoError(t, err)
		lastErrs = errs
		for _, w := range []*world{a, b, c} {
			w.clk.Advance(time.Second)
		}
	}
	assert.Positive(t, b.fleet.JobsCreated()[bServer],
		"plan B's only call (150 ms; half of the pass is 200 ms) never answered in time in 6 shared passes (3 plans cut short); last errors: %v", lastErrs)
}
