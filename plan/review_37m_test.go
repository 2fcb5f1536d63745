package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	w := newBoltWorld(t, 6)
	require.NoError(t, w.s.Create(w.ctx, w.inFlight(t, "r", w.servers[:1])))
	require.NoError(t, w.s.Create(w.ctx, runningPlanOf(t, "q", w.servers[3:4], w.clk.Now())))

	hr, err := w.s.GetHead(w.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, hr.Index.InFlight)
	v, err := w.s.GetView(w.ctx, "q")
	require.NoError(t, err)
	v.UUID, v.Version = "r", hr.Version
	v.State = plan.StateCanceled
	perr := w.s.PutView(w.ctx, v)
	w.createOver(t, perr, "plan q's view written over plan r's in-flight reboot")

	truth := w.reopen(t)
	gr, gerr := truth.Get(w.ctx, "r")
	gh, herr := truth.GetHead(w.ctx, "r")
	require.False(t, perr == nil && (herr != nil || gerr != nil), "PutView accepted q's view over r, and r can no longer be read: GetHead %v, Get %v", herr, gerr)
	if perr != nil {
		return
	}
	assert.False(t, gr.Unfinished() != gh.Unfinished(),
		"PutView accepted q's view over r: the header says unfinished=%v, the records (reboot 0 %s %q) unfinished=%v",
		gh.Unfinished(), gr.Reboots[0].ServerUUID, gr.Reboots[0].Step, gr.Unfinished())
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
	w := newBoltWorld(t, 4)
	defer w.s.Close()
	require.NoError(t, w.s.Create(w.ctx, w.inFlight(t, "r", w.servers[:2])))
	backToPending(t, w, w.s)
}

// backToPending gets a view of plan r through s, sets its in-flight
// reboot 0 back to pending, cancels the plan and writes the view.
func backToPending(t *testing.T, w *boltWorld, s plan.ViewStore) {
	t.Helper()
	v, err := s.GetView(w.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, v.Index.InFlight)
	require.Equal(t, 0, v.Pos[0])
	v.Reboots[0].Step = plan.StepPending
	v.Index.Started, v.Index.InFlight = 0, nil
	v.State = plan.StateCanceled
	perr := s.PutView(w.ctx, v)
	w.createOver(t, perr, "a view setting the in-flight reboot (job-1) back to pending")
}

// TestReview37_AdapterPutViewInFlightBackToPending (issue 37 round 11, the
// Views adapter over a plan.Store that is not a ViewStore): as
// TestReview37_BoltPutViewInFlightBackToPending, a view setting the
// in-flight reboot back to pending and cancelling the plan is written (Put
// of the whole plan), and Create accepts a plan over its server.
func TestReview37_AdapterPutViewInFlightBackToPending(t *testing.T) {
	w := newBoltWorld(t, 4)
	defer w.s.Close()
	require.NoError(t, w.s.Create(w.ctx, w.inFlight(t, "r", w.servers[:2])))
	backToPending(t, w, plan.Views(struct{ plan.Store }{w.s}))
}

// TestReview37_BoltPutViewStaleViewNewVersion (issue 37 round 11, bbolt):
// a view read at version 1 (reboot 0 pending), its Version set to the
// stored one after another writer started reboot 0 (job-1), and the plan
// cancelled, is written: PutView skips reboot 0 because it equals the
// view's base (read at version 1), not the stored record, so the header
// (nothing started, canceled) replaces the stored one while record 0 is in
// flight. Create then accepts a plan over its server.
func TestReview37_BoltPutViewStaleViewNewVersion(t *testing.T) {
	w := newBoltWorld(t, 4)
	require.NoError(t, w.s.Create(w.ctx, runningPlanOf(t, "r", w.servers[:2], w.clk.Now())))

	stale, err := w.s.GetView(w.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, stale.Pos)
	started := stale
	started.Plan = stale.Plan.Clone()
	at := w.clk.Now()
	started.Reboots[0].Step, started.Reboots[0].JobUUID, started.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	started.Index.Started, started.Index.InFlight = 1, []int{0}
	require.NoError(t, w.s.PutView(w.ctx, started)) // the executor starts reboot 0
	h, err := w.s.GetHead(w.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, h.Index.InFlight)

	stale.Version = h.Version
	stale.State = plan.StateCanceled
	perr := w.s.PutView(w.ctx, stale)
	w.createOver(t, perr, "a view of version 1 written as the stored version over reboot 0 in flight")

	truth := w.reopen(t)
	if perr != nil {
		return
	}
	_, gerr := truth.Get(w.ctx, "r")
	assert.NoError(t, gerr, "PutView accepted a stale view over reboot 0 in flight, and the plan can no longer be read")
}
