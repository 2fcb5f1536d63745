package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	w := newBoltWorld(t, 6)
	require.NoError(t, w.s.Create(w.ctx, w.inFlight(t, "r", w.servers[:3])))

	h, err := w.s.GetHead(w.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{0}, h.Index.InFlight)
	v := plan.View{Plan: h.Plan, Index: h.Index, Pos: []int{}}
	v.State = plan.StateCanceled
	v.Index.InFlight = nil
	v.Index.Failed++
	perr := w.s.PutView(w.ctx, v)
	w.createOver(t, perr, "a view dropping the stored in-flight reboot")

	truth := w.reopen(t)
	gr, gerr := truth.Get(w.ctx, "r")
	gh, herr := truth.GetHead(w.ctx, "r")
	require.False(t, perr == nil && (herr != nil || gerr != nil), "PutView accepted a view dropping the stored in-flight reboot, and the plan can no longer be read: GetHead %v, Get %v", herr, gerr)
	if perr != nil {
		return
	}
	assert.False(t, gr.Unfinished() != gh.Unfinished(),
		"PutView accepted (%v) a view dropping the stored in-flight reboot: the header says unfinished=%v, the records (reboot 0 %q) unfinished=%v",
		perr, gh.Unfinished(), gr.Reboots[0].Step, gr.Unfinished())
}
