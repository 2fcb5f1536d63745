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

// TestReview37o_PutViewEndsFrozenReboot (issue 37, review round 13):
// CheckStepForward is said to allow only the executor's own step changes,
// but a reboot that froze the database shard (Frozen) may be written
// ended while it still holds the shard: released from freeze (a pass
// releases a frozen reboot only after it saw the shard unfrozen, and
// clears Frozen), or failed_unfreeze -> failed with Frozen kept (a pass
// goes there only once the shard is unfrozen). The plan then ends and no
// pass ever unfreezes the shard: ground truth, the fake fleet's shard is
// still frozen after the executor ran the plan to its end. Each case runs
// against the bbolt store.
func TestReview37o_PutViewEndsFrozenReboot(t *testing.T) {
	cases := map[string]func(r *plan.Reboot, ix *plan.Index){
		"released while frozen": func(r *plan.Reboot, ix *plan.Index) {
			r.Step = plan.StepReleased
			ix.Released++
		},
		"failed_unfreeze to failed, still frozen": func(r *plan.Reboot, ix *plan.Index) {
			now := time.Now()
			r.Step, r.CanceledAt, r.Error = plan.StepFailed, &now, "x"
			ix.Failed++
			ix.Failures++
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			fs := fleetServers(0, 2, time.Minute)
			fleet := fake.NewFleet(clk.Now, fs[0].UUID, fs...)
			bs, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
			require.NoError(t, err)
			defer bs.Close()
			o := opts()
			o.Concurrency = plan.Count(1)
			o.FailureBudget = plan.Count(5)
			p, _, err := plan.Create(fleet.Servers(), o)
			require.NoError(t, err)
			p, err = plan.Run(p)
			require.NoError(t, err)
			require.NoError(t, bs.Create(ctx, p))
			ex := &plan.Executor{Fleet: fleet, Store: bs, Now: clk.Now}
			// First pass: the primary's reboot enters freeze and freezes
			// the shard.
			_, err = ex.Pass(ctx, p.UUID)
			require.NoError(t, err)
			frozen, _ := fleet.Frozen()
			require.True(t, frozen, "the primary's reboot froze the shard")

			v, err := bs.GetView(ctx, p.UUID)
			require.NoError(t, err)
			require.Equal(t, []int{0}, v.Index.InFlight)
			require.True(t, v.Reboots[0].Frozen)
			if name != "released while frozen" {
				// Stored failed_unfreeze (a failed reboot that must still
				// unfreeze the shard), as a pass writes it.
				v.Reboots[0].Step = plan.StepFailFreeze
				now := clk.Now()
				v.Reboots[0].CanceledAt, v.Reboots[0].Error = &now, "reboot job failed"
				v.Index.Failures++
				require.NoError(t, bs.PutView(ctx, v))
				v, err = bs.GetView(ctx, p.UUID)
				require.NoError(t, err)
				v.Index.Failures--
			}
			k := 0
			mutate(&v.Reboots[k], &v.Index)
			v.Index.InFlight = nil
			v.State = plan.StateCanceled
			perr := bs.PutView(ctx, v)

			// The executor runs the plan to its end (or for an hour).
			for i := 0; i < 60; i++ {
				clk.Advance(time.Minute)
				q, _ := ex.Pass(ctx, p.UUID)
				if !q.Unfinished() {
					break
				}
			}
			g, err := bs.Get(ctx, p.UUID)
			require.NoError(t, err)
			frozen, _ = fleet.Frozen()
			assert.False(t, perr == nil && frozen,
				"a view ending reboot 0 while it holds the shard frozen was written (stored %q, Frozen %v, plan %q) and the shard stays frozen with nothing left to unfreeze it",
				g.Reboots[0].Step, g.Reboots[0].Frozen, g.State)
		})
	}
}

// hangingCancelFleet: the fleet's CancelJob of one server's job never
// answers (it returns only when the caller gives up: the pass's context
// ends), e.g. an API call stuck behind that server's dead BMC.
type hangingCancelFleet struct {
	*fake.Fleet
	server string
}

func (f hangingCancelFleet) CancelJob(ctx context.Context, a plan.Action) error {
	if a.Server == f.server {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.Fleet.CancelJob(ctx, a)
}

// TestReview37o_HangingCancelStallsPlan (issue 37, review round 13;
// liveness with the fault kept on): server cn000's job never drains, so
// it is cancelled after DrainTimeout (cancel_job), and the fleet's
// CancelJob of it hangs for ever. The cancel is asked again every pass,
// before the job creations (the reboots whose job the fleet shows are
// advanced first), and a pass bounded by a timeout (the etcd Executor's
// PassTimeout) stops at its context's end: no later action of the pass
// is taken, ever. The other servers have a free slot (concurrency 2, one
// taken by cn000), yet none of those left when the cancel began is ever
// rebooted: each is asked for, never created, and released after
// JobTimeout (of 29 servers, 22 are never rebooted in 4 hours). Ground truth:
// the fake fleet's job creations.
func TestReview37o_HangingCancelStallsPlan(t *testing.T) {
	fs := fleetServers(0, 30, time.Minute)
	fs[0].Drain = 1000 * time.Hour // never drains
	o := opts()
	o.Concurrency = plan.Count(2)
	o.FailureBudget = plan.Count(4)
	w := newWorld(t, fs, "", o)
	w.exec = &plan.Executor{Fleet: hangingCancelFleet{w.fleet, fs[0].UUID}, Store: w.store, Now: w.clk.Now}
	for i := 0; i < 4*60; i++ {
		ctx, cancel := context.WithTimeout(w.ctx, 20*time.Millisecond)
		_, _ = w.exec.Pass(ctx, w.uuid)
		cancel()
		w.clk.Advance(time.Minute)
	}
	p, _ := w.store.Get(w.ctx, w.uuid)
	require.Equal(t, plan.StepCancelJob, p.Reboots[0].Step, "cn000's job is being cancelled:\n%s", plan.Table(p))
	created := w.fleet.JobsCreated()
	assert.Positive(t, created[fs[1].UUID], "cn001 rebooted before the cancel")
	var never []string
	for _, s := range fs[1:] {
		if created[s.UUID] == 0 {
			never = append(never, s.Hostname)
		}
	}
	assert.Empty(t, never, "in 4 hours with a free slot, these servers were never rebooted while cn000's cancel hangs:\n%s", plan.Table(p))
}
