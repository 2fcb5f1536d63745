package plan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestBoltViewCapsPendingPerPass (issue 37, review round 14): a BoltStore
// view loads at most BoltMaxStartsPerPass pending reboots whatever the
// concurrency, so a pass starts at most that many, and the plan still
// reaches its concurrency over the next passes. Ground truth: the fake
// fleet's job creations.
func TestBoltViewCapsPendingPerPass(t *testing.T) {
	ctx := context.Background()
	const n, conc = 4000, 3500
	fs := make([]fake.FleetServer, n)
	for i := range fs {
		fs[i] = fake.FleetServer{UUID: fmt.Sprintf("u%05d", i), Hostname: fmt.Sprintf("cn%05d", i), Platform: "1",
			Queue: time.Hour, Drain: time.Hour, Shutdown: time.Hour, Boot: time.Hour, Services: time.Hour}
	}
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", fs...)
	p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "big", Target: "2", Select: plan.SelectAll,
		Concurrency: plan.Count(conc), CreatedAt: clk.Now()})
	require.NoError(t, err)
	p, err = plan.Run(p)
	require.NoError(t, err)
	st, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Create(ctx, p))
	v, err := st.GetView(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, plan.BoltMaxStartsPerPass, len(v.Reboots), "a view of a plan with nothing in flight loads the capped pending ones")
	ex := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	created := func() int {
		c := 0
		for _, k := range fleet.JobsCreated() {
			c += k
		}
		return c
	}
	var seen []int
	for pass := 0; pass < 4; pass++ {
		_, err := ex.Pass(ctx, "big")
		require.NoError(t, err)
		seen = append(seen, created())
		clk.Advance(time.Second)
	}
	assert.Equal(t, plan.BoltMaxStartsPerPass, seen[0], "the first pass starts at most BoltMaxStartsPerPass: %v", seen)
	assert.Equal(t, conc, seen[len(seen)-1], "the plan reaches its concurrency over several passes: %v", seen)
	// The view read apart from its decoding is the same view.
	r, err := st.ReadView(ctx, "big")
	require.NoError(t, err)
	v1, err := r.View()
	require.NoError(t, err)
	v2, err := st.GetView(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, v2.Pos, v1.Pos)
	assert.Equal(t, v2.Reboots, v1.Reboots)
	_, err = plan.ViewRead{}.View()
	assert.Error(t, err, "a ViewRead not read decodes to nothing")
}
