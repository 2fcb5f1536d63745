package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37n_AdapterReleasedRunningJobSecondJob (issue 37 round 12, the
// Views adapter, ground truth fake.Fleet.Starts): once reboot 0's job runs
// (seen by the fleet), a view releasing it and ending the plan is written
// (CheckStepForward refuses only a move back to pending), Create accepts a
// new plan over the server, and its executor creates a second job on the
// server while the first runs.
func TestReview37n_AdapterReleasedRunningJobSecondJob(t *testing.T) {
	w := newWorld(t, fleetServers(0, 1, 10*time.Minute), "", opts())
	vs := plan.Views(w.store)
	for i := 0; i < 20; i++ {
		p := w.pass()
		if p.Reboots[0].Step == plan.StepJob && p.Reboots[0].JobSeen {
			break
		}
		w.clk.Advance(5 * time.Second)
	}
	p, err := w.store.Get(w.ctx, w.uuid)
	require.NoError(t, err)
	require.Equal(t, plan.StepJob, p.Reboots[0].Step)
	require.Len(t, w.fleet.Starts(), 1)

	v, err := vs.GetView(w.ctx, w.uuid)
	require.NoError(t, err)
	v.Reboots[0].Step = plan.StepReleased
	v.Index.InFlight = nil
	v.Index.Released++
	v.State = plan.StateFailed
	perr := vs.PutView(w.ctx, v)

	o := opts()
	o.UUID = "p2"
	q, _, err := plan.Create(w.fleet.Servers(), o)
	require.NoError(t, err)
	q, err = plan.Run(q)
	require.NoError(t, err)
	cerr := w.store.Create(w.ctx, q)
	if cerr == nil {
		w.uuid = "p2"
		for i := 0; i < 5; i++ {
			w.clk.Advance(5 * time.Second)
			w.pass()
		}
	}
	assert.Len(t, w.fleet.Starts(), 1, "a view releasing the running job (%v), a plan over its server (%v): the fleet saw %d job creations on %s", perr, cerr, len(w.fleet.Starts()), p.Reboots[0].ServerHostname)
}
