package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview40ae_WaitingEmptyWhileJobQueuedOrDrainHangs: issue 40 point 1
// says "Waiting always names what a reboot waits for", and Plan.Waiting's
// doc "what a reboot in flight waits for". A reboot whose job the fleet
// shows but has not started (queued behind other jobs: JobObs.Started
// false) or whose drain hangs (Started, not Drained) waits in step job,
// in flight and counted offline, holding the plan's only slot, for
// JobTimeout (1 h), then is cancelled and the plan fails; all that hour
// Waiting is "": the pass knows (the fleet's observation says the job has
// not started / not drained) and says nothing, the same silent hour as
// point 1's headnode. Ground truth: the fake fleet's observation of the
// job.
func TestReview40ae_WaitingEmptyWhileJobQueuedOrDrainHangs(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(s *fake.FleetServer)
	}{
		{"queued", func(s *fake.FleetServer) { s.Queue = 100 * time.Hour }},
		{"drain hangs", func(s *fake.FleetServer) { s.Drain = 100 * time.Hour }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := fleetServers(0, 2, time.Minute)
			tc.set(&fs[0])
			o := opts()
			o.Concurrency = plan.Count(1)
			w := newWorld(t, fs, "", o)
			seen := 0
			// Setup changed by the lead (t40f): 15 minutes, not 50: the
			// fleet's DrainTimeout (15 min) cancels a hung drain's job at
			// minute 16, which ended the "drain hangs" case's step job
			// before the check; Waiting is checked from minute 10 on.
			for i := 0; i < 15; i++ {
				p := w.pass()
				r := p.Reboots[0]
				require.Equal(t, plan.StepJob, r.Step, "setup: after %d min\n%s", i, plan.Table(p))
				obs, err := w.fleet.Observe(w.ctx, p)
				require.NoError(t, err)
				j := obs.Jobs[r.JobUUID]
				if i >= 10 && j.Exists && !j.Drained && !j.Finished {
					seen++
					if !strings.Contains(p.Waiting, r.ServerHostname) {
						t.Fatalf("after %d min: the reboot of %s waits in step job (in flight, the plan's one slot; the fleet shows its job started=%v drained=%v) and %s is held behind it, yet Waiting is %q: nothing names what the plan waits for until JobTimeout (1 h) fails it\n%s",
							i, r.ServerHostname, j.Started, j.Drained, p.Reboots[1].ServerHostname, p.Waiting, plan.Table(p))
					}
				}
				w.clk.Advance(time.Minute)
			}
			require.NotZero(t, seen, "setup: the fleet never showed the job held")
		})
	}
}
