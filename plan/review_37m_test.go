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

// TestReview37_BoltPutViewStartedPastUnloaded (issue 37 round 11, bbolt):
// CheckLoads asks only that the view load the stored in-flight reboots and
// the stored first pending one; the view's Index.Started may then jump
// past pending reboots it never loaded (counted failed). PutView writes
// that index: the header says every reboot started while records 2 and 3
// are pending (never rebooted), and a fresh store's Get refuses the plan.
func TestReview37_BoltPutViewStartedPastUnloaded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	r := runningPlanOf(t, "r", servers, clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 1, v.Index.Started)
	v.Pos, v.Reboots = []int{0, 1}, []plan.Reboot{v.Reboots[0], v.Reboots[1]}
	v.Reboots[1].Step, v.Reboots[1].FinishedAt = plan.StepFailed, &at
	v.Index.Started, v.Index.Failed = 4, v.Index.Failed+3
	perr := s.PutView(ctx, v)
	require.NoError(t, s.Close())

	truth, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer truth.Close()
	if perr != nil {
		return
	}
	gr, gerr := truth.Get(ctx, "r")
	gh, herr := truth.GetHead(ctx, "r")
	require.NoError(t, herr)
	require.NoError(t, gerr, "PutView accepted a view whose index starts reboots it did not load (header started %d), and the plan can no longer be read", gh.Index.Started)
	assert.Equal(t, plan.IndexOf(gr).Started, gh.Index.Started, "the header's index says started, the records do not")
}

// TestReview37_BoltPutViewInFlightBackToPending (issue 37 round 11,
// bbolt): a view that loads the stored in-flight reboot but sets it back
// to pending (its JobUUID still set: no job ended) and cancels the plan is
// written: no legitimate path moves a reboot from in flight to pending,
// yet the plan now ends with the reboot's job running, and Create accepts
// a plan over its server.
func TestReview37_BoltPutViewInFlightBackToPending(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer s.Close()
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	r := runningPlanOf(t, "r", servers[:2], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, s.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 0, v.Pos[0])
	v.Reboots[0].Step = plan.StepPending
	v.Index.Started, v.Index.InFlight = 0, nil
	v.State = plan.StateCanceled
	perr := s.PutView(ctx, v)
	cerr := s.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view setting the in-flight reboot (job-1) back to pending (%v), then a plan over its server (%v): one must be refused", perr, cerr)
}

// TestReview37_AdapterPutViewInFlightBackToPending (issue 37 round 11, the
// Views adapter over a plan.Store that is not a ViewStore): as
// TestReview37_BoltPutViewInFlightBackToPending, a view setting the
// in-flight reboot back to pending and cancelling the plan is written (Put
// of the whole plan), and Create accepts a plan over its server.
func TestReview37_AdapterPutViewInFlightBackToPending(t *testing.T) {
	ctx := context.Background()
	bs, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer bs.Close()
	s := plan.Views(struct{ plan.Store }{bs})
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	r := runningPlanOf(t, "r", servers[:2], clk.Now())
	at := clk.Now()
	r.Reboots[0].Step, r.Reboots[0].JobUUID, r.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	require.NoError(t, bs.Create(ctx, r))

	v, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 0, v.Pos[0])
	v.Reboots[0].Step = plan.StepPending
	v.Index.Started, v.Index.InFlight = 0, nil
	v.State = plan.StateCanceled
	perr := s.PutView(ctx, v)
	cerr := bs.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view setting the in-flight reboot (job-1) back to pending (%v), then a plan over its server (%v): one must be refused", perr, cerr)
}

// TestReview37_BoltPutViewStaleViewNewVersion (issue 37 round 11, bbolt):
// a view read at version 1 (reboot 0 pending), its Version set to the
// stored one after another writer started reboot 0 (job-1), and the plan
// cancelled, is written: PutView skips reboot 0 because it equals the
// view's base (read at version 1), not the stored record, so the header
// (nothing started, canceled) replaces the stored one while record 0 is in
// flight. Create then accepts a plan over its server.
func TestReview37_BoltPutViewStaleViewNewVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	servers := resumeServers(clk, 4)
	require.NoError(t, s.Create(ctx, runningPlanOf(t, "r", servers[:2], clk.Now())))

	stale, err := s.GetView(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, stale.Pos)
	w := stale
	w.Plan = stale.Plan.Clone()
	at := clk.Now()
	w.Reboots[0].Step, w.Reboots[0].JobUUID, w.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	w.Index.Started, w.Index.InFlight = 1, []int{0}
	require.NoError(t, s.PutView(ctx, w)) // the executor starts reboot 0
	h, err := s.GetHead(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, h.Index.InFlight)

	stale.Version = h.Version
	stale.State = plan.StateCanceled
	perr := s.PutView(ctx, stale)
	cerr := s.Create(ctx, runningPlanOf(t, "q", servers[:1], clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "a view of version 1 written as the stored version over reboot 0 in flight (%v), then a plan over its server (%v): one must be refused", perr, cerr)
	require.NoError(t, s.Close())

	truth, err := plan.OpenBolt(path)
	require.NoError(t, err)
	defer truth.Close()
	if perr != nil {
		return
	}
	_, gerr := truth.Get(ctx, "r")
	assert.NoError(t, gerr, "PutView accepted a stale view over reboot 0 in flight, and the plan can no longer be read")
}
