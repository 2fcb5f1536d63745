package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan/plantest"
)

// TestFleetContract runs the plan.Fleet job contract of the conformance
// kit (plantest.FleetContract) on the inventory Fleet, over honest fake
// BMCs and a fake clock, its workers stepped by hand (issue 40, point 4).
// The kit's plans live in no store: PlanCheck says they run their jobs.
func TestFleetContract(t *testing.T) {
	plantest.FleetContract(t, func() (plantest.Fleet, error) {
		w, ids := newWorld(t, 2, 1)
		w.open()
		w.f.opts.PlanCheck = func(context.Context, string, string) (bool, string, error) { return true, "", nil }
		return plantest.Fleet{Fleet: w.f, Servers: w.inv.PlanServers(), Close: func() { _ = w.f.Close() },
			Advance: func(d time.Duration) {
				for end := w.clk.Real().Add(d); w.clk.Real().Before(end); w.clk.Advance(time.Second) {
					for _, id := range ids {
						w.step(id)
					}
				}
			}}, nil
	})
}
