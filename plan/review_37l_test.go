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

// TestReview37_BoltPutViewDropsStoredInFlight (issue 37 round 10, bbolt):
// a PutView whose view does not load the stored in-flight reboot, with an
// Index that no longer names it in flight and the plan canceled, passes
// View.check (it checks only the loaded reboots against the new index)
// and is written. The header then says the plan ended (ListHeads, GetHead:
// what the executor and the listing read) while its record says the
// reboot is in flight: a fresh store's GetHead refuses the plan as
// corrupt (the index does not match the records), so the store accepted a
// write that wedges the plan (no pass, no command can read its header)
// while the reboot's job runs on unfollowed; and Create, which skips
// plans it cannot read (listTx's bad list is ignored), accepts a new plan
// over the server whose job still runs.
func TestReview37_BoltPutViewDropsStoredInFlight(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 6)
	r := runningPlanOf(t, "r", servers[:3], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	h, err := s.GetHead(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, h.Index.InFlight)
	v := plan.View{Plan: h.Plan, Index: h.Index, Pos: []int{}}
	v.State = plan.StateCanceled
	v.Index.InFlight = nil
	v.Index.Failed++
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view dropping the stored in-flight reboot (%v) and then a plan over its server (%v): one must be refused", perr, cerr)
	require.NoError(t, s.Close())

	truth, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer truth.Close()
	gr, gerr := truth.Get(ctx, "r")
	gh, herr := truth.GetHead(ctx, "r")
	require.False(t, perr == nil && (herr != nil || gerr != nil), "PutView accepted a view dropping the stored in-flight reboot, and the plan can no longer be read: GetHead %v, Get %v", herr, gerr)
	if perr != nil {
		return
	}
	assert.False(t, gr.Unfinished() != gh.Unfinished(),
		"PutView accepted (%v) a view dropping the stored in-flight reboot: the header says unfinished=%v, the records (reboot 0 %q) unfinished=%v",
		perr, gh.Unfinished(), gr.Reboots[0].Step, gr.Unfinished())
}
