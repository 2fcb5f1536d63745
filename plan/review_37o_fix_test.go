package plan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// capViews is a ViewStore whose views say it holds at most n reboots of a
// plan in flight (as the etcd store's say MaxInFlight).
type capViews struct {
	plan.ViewStore
	n int
}

func (s capViews) GetView(ctx context.Context, uuid string) (plan.View, error) {
	v, err := s.ViewStore.GetView(ctx, uuid)
	v.MaxInFlight = s.n
	return v, err
}

// TestReview37o_ViewMaxInFlightHoldsStarts (issue 37, review round 13,
// the fix of TestReview37o_MaxInFlightWedgesPlan): a view whose store
// holds at most 2 reboots of a plan in flight (View.MaxInFlight) starts
// none past 2 whatever the concurrency (8), says so in Plan.Waiting, and
// the plan still runs to its end. Ground truth: the fake fleet's job
// creations, each with the servers offline at that instant.
func TestReview37o_ViewMaxInFlightHoldsStarts(t *testing.T) {
	fs := fleetServers(0, 8, time.Minute)
	o := opts()
	o.Concurrency = plan.Count(8)
	w := newWorld(t, fs, "", o)
	ex := &plan.Executor{Fleet: w.fleet, Store: capViews{plan.Views(w.store), 2}, Now: w.clk.Now}
	v, err := ex.Pass(w.ctx, w.uuid)
	require.NoError(t, err)
	assert.Len(t, v.Index.InFlight, 2)
	assert.True(t, strings.Contains(v.Waiting, "2 reboot(s) in flight, the most the plan store holds"), "waiting: %q", v.Waiting)
	for i := 0; i < 500 && v.Unfinished(); i++ {
		w.clk.Advance(10 * time.Second)
		v, err = ex.Pass(w.ctx, w.uuid)
		require.NoError(t, err)
		require.LessOrEqual(t, len(v.Index.InFlight), 2)
	}
	assert.Equal(t, plan.StateComplete, v.State)
	starts := w.fleet.Starts()
	assert.Len(t, starts, 8)
	for _, s := range starts {
		assert.LessOrEqual(t, len(s.Offline), 1, "at the start of %s, other servers offline: %v", s.Server, s.Offline)
	}
}
