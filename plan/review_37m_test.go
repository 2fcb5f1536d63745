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

// TestReview37_BoltPutViewOtherPlansView (issue 37 round 11, bbolt): a
// view read by GetView of plan q, renamed to plan r (UUID and Version set
// to r's), is written over r. PutView skips every loaded reboot equal to
// the one the view's base read (base.orig: q's records), so the check that
// record i is the view's server is never reached, and the header (q's
// index: nothing in flight; state canceled) replaces r's while r's record
// still has its reboot in flight on server A. The stored plan lies about
// the reboot in flight, and Create accepts a plan over A.
func TestReview37_BoltPutViewOtherPlansView(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 6)
	r := runningPlanOf(t, "r", servers[:1], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))
	require.NoError(t, s.Create(ctx, runningPlanOf(t, "q", servers[3:4], clk.Now())))

	hr, err := s.GetHead(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, hr.Index.InFlight)
	v, err := s.GetView(ctx, "q")
	require.NoError(t, err)
	v.UUID, v.Version = "r", hr.Version
	v.State = plan.StateCanceled
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlanOf(t, "p", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "plan q's view written over plan r (%v), then a plan over r's in-flight server (%v): one must be refused", perr, cerr)
	require.NoError(t, s.Close())

	truth, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer truth.Close()
	gr, gerr := truth.Get(ctx, "r")
	gh, herr := truth.GetHead(ctx, "r")
	require.False(t, perr == nil && (herr != nil || gerr != nil), "PutView accepted q's view over r, and r can no longer be read: GetHead %v, Get %v", herr, gerr)
	if perr != nil {
		return
	}
	assert.False(t, gr.Unfinished() != gh.Unfinished(),
		"PutView accepted q's view over r: the header says unfinished=%v, the records (reboot 0 %s %q) unfinished=%v",
		gh.Unfinished(), gr.Reboots[0].ServerUUID, gr.Reboots[0].Step, gr.Unfinished())
}
