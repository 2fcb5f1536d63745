package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// Issue 40 point 1, round 25: Waiting always names what a reboot waits
// for. A reboot in wait_services whose server came back up but whose
// services are never reported up (a fleet whose Observe leaves
// ServerObs.ServicesUp false) waited an hour with an empty Waiting, then
// failed. Ground truth: the fake fleet observes the server up (not Down)
// and its services not up.
func TestRegression40WaitingNamesServices(t *testing.T) {
	fs := fleetServers(0, 1, time.Minute)
	fs[0].NeverUp = true
	w := newWorld(t, fs, "", opts())
	named := false
	for i := 0; i < 90; i++ {
		p := w.pass()
		r := p.Reboots[0]
		if r.Step == plan.StepServices {
			o, err := w.fleet.Observe(w.ctx, p)
			require.NoError(t, err)
			if s := o.Servers[r.ServerUUID]; !s.Down && !s.ServicesUp {
				if !strings.Contains(p.Waiting, "services not up") || !strings.Contains(p.Waiting, r.ServerHostname) {
					t.Fatalf("the reboot of %s waits in wait_services, the server up and its services not (the fleet says so), and Waiting is %q: it does not name what the plan waits for\n%s",
						r.ServerHostname, p.Waiting, plan.Table(p))
				}
				named = true
			}
		}
		w.clk.Advance(time.Minute)
	}
	require.True(t, named, "no reboot waited for its services with its server up")
}
