package plantest

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/plan"
)

// checkServers checks that Observe (and ObserveView of a full view, and of
// a partial view of each reboot) of the healthy fleet reports every server
// of p (of the view) in Observations.Servers, up, with ServicesUp:
// a server missing counts as offline (no job starts while Concurrency
// servers are, and the plan waits for good), and one whose ServicesUp is
// left false (its zero value) holds every reboot in wait_services after
// its job for Config.ServicesTimeout, then fails it.
func checkServers(ctx context.Context, t testing.TB, fleet plan.Fleet, p plan.Plan, when string) {
	t.Helper()
	for _, ob := range observeAll(ctx, t, fleet, p, "the servers, "+when) {
		way := ob.way
		for _, r := range ob.reboots {
			s, ok := ob.o.Servers[r.ServerUUID]
			switch {
			case !ok:
				t.Errorf("%s, %s of a healthy fleet does not report server %s (%s) in Observations.Servers: the Executor counts a server missing as offline, and starts no job while Concurrency servers are: the plan waits for good (Waiting: servers offline)",
					when, way, r.ServerUUID, r.ServerHostname)
			case s.Down:
				t.Errorf("%s, %s of a healthy fleet reports server %s (%s) Down in Observations.Servers: the Executor counts it offline", when, way, r.ServerUUID, r.ServerHostname)
			case !s.ServicesUp:
				t.Errorf("%s, %s of a healthy fleet reports server %s (%s) with Observations.Servers[%s].ServicesUp false: after its reboot job, the Executor waits for its services (wait_services) for Config.ServicesTimeout (1 h), then fails the reboot",
					when, way, r.ServerUUID, r.ServerHostname, r.ServerUUID)
			}
		}
	}
}
