package redfish_test

import (
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// BenchmarkRequests counts the HTTP requests one operation costs in
// steady state (connected, session open), against the emulated BMC over
// TLS on loopback, and reports them as requests/op.
func BenchmarkRequests(b *testing.B) {
	for _, op := range []string{"state", "power-off", "power-on"} {
		b.Run(op, func(b *testing.B) {
			r := newRig(b, redfishtest.Quirks{}, fake.PowerConfig{})
			c := r.connect(b)
			var reqs int
			for b.Loop() {
				switch op {
				case "state":
					before := r.bmc.Requests()
					_, _ = c.State(ctx)
					reqs += r.bmc.Requests() - before
				case "power-off":
					r.hw.ForceState(power.StateOn)
					before := r.bmc.Requests()
					_ = c.Off(ctx, power.ModeHard)
					reqs += r.bmc.Requests() - before
				case "power-on":
					r.hw.ForceState(power.StateOff)
					before := r.bmc.Requests()
					_ = c.On(ctx)
					reqs += r.bmc.Requests() - before
				}
			}
			b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
		})
	}
}
