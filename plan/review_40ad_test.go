package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview40ad_WaitingEmptyWhileRebootedServerStaysDown: issue 40 point
// 1 says "Waiting always names what a reboot waits for", and round 25
// taught wait_services to name a server that is back up with its services
// not up. A server whose reboot job finished but which does not come back
// (it reads Down: a slow firmware update, a boot that hangs) waits in
// wait_services just the same, counted in flight, for ServicesTimeout,
// then the reboot fails; Waiting names nothing all that hour (next.go only
// sets ps.services when !srv.Down). Ground truth: the fake fleet observes
// the server Down, its job finished.
func TestReview40ad_WaitingEmptyWhileRebootedServerStaysDown(t *testing.T) {
	fs := fleetServers(0, 1, 3*time.Hour) // boots in three hours
	o := opts()
	o.Concurrency = plan.Count(1)
	w := newWorld(t, fs, "", o)
	seen := 0
	for i := 0; i < 90; i++ {
		p := w.pass()
		r := p.Reboots[0]
		if r.Step == plan.StepServices {
			obs, err := w.fleet.Observe(w.ctx, p)
			require.NoError(t, err)
			if s := obs.Servers[r.ServerUUID]; s.Down {
				seen++
				if !strings.Contains(p.Waiting, r.ServerHostname) {
					t.Fatalf("after %d min: the reboot of %s waits in wait_services (in flight) for a server the fleet reads Down after its job finished, and Waiting is %q: it does not name what the plan waits for (the reboot fails after ServicesTimeout)\n%s",
						i, r.ServerHostname, p.Waiting, plan.Table(p))
				}
			}
		}
		w.clk.Advance(time.Minute)
	}
	require.NotZero(t, seen, "setup: no pass saw the reboot in wait_services with its server down")
}
