package plan_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// releaseInFlight turns the view's in-flight reboot 0 (job-1, seen) into a
// released one ("never started") and ends the plan: CheckStepForward
// refuses only going back to pending, so in flight -> released passes.
func releaseInFlight(v *plan.View) {
	v.Reboots[0].Step = plan.StepReleased
	v.Index.InFlight = nil
	v.Index.Released++
	v.State = plan.StateFailed
}

// TestReview37n_BoltPutViewReleasesRunningJob (issue 37 round 12, bbolt):
// a view releasing the stored in-flight reboot whose job (job-1) the fleet
// showed, and ending the plan, is written; Create then accepts a plan over
// its server while job-1 runs.
func TestReview37n_BoltPutViewReleasesRunningJob(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	r := runningPlanOf(t, "r", servers[:1], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].JobSeen, r.Reboots[0].StartedAt = plan.StepJob, "job-1", true, &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	releaseInFlight(&v)
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	require.NoError(t, s.Close())
	truth, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer truth.Close()
	g, err := truth.Get(ctx, "r")
	require.NoError(t, err)
	assert.True(t, perr != nil || cerr != nil,
		"a view releasing reboot 0 (job-1 seen running) and ending the plan was written (stored: %q, state %q), and a plan over its server was created", g.Reboots[0].Step, g.State)
}

// TestReview37n_AdapterPutViewReleasesRunningJob: the same through the
// Views adapter (Put of the whole plan).
func TestReview37n_AdapterPutViewReleasesRunningJob(t *testing.T) {
	ctx := context.Background()
	bs, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer bs.Close()
	s := plan.Views(struct{ plan.Store }{bs})
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	r := runningPlanOf(t, "r", servers[:1], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].JobSeen, r.Reboots[0].StartedAt = plan.StepJob, "job-1", true, &at
	require.NoError(t, bs.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	releaseInFlight(&v)
	perr := s.PutView(ctx, v)
	cerr := bs.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view releasing reboot 0 (job-1 seen running) and ending the plan (%v), then a plan over its server (%v): one must be refused", perr, cerr)
}
