package main

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/plan"
)

// TestFailedListKeepsGauges: a pass whose store List failed leaves the
// plan and reboot gauges as the last good List set them (issue 38, B.11;
// old code: the executor observed the failed List's empty answer and set
// every gauge to zero).
func TestFailedListKeepsGauges(t *testing.T) {
	m := newMetrics()
	p := plan.Plan{UUID: "p1", State: plan.StateRunning, Reboots: []plan.Reboot{{ServerUUID: "s1"}, {ServerUUID: "s2"}}}
	m.observe([]plan.View{plan.FullView(p)}, map[string]plan.View{}, nil)
	assert.Equal(t, 1.0, gauge(t, m.plans.WithLabelValues(string(plan.StateRunning))))
	assert.Equal(t, 2.0, gauge(t, m.reboots.WithLabelValues("pending")))
	m.observe(nil, map[string]plan.View{}, errors.New("store: list: i/o timeout"))
	assert.Equal(t, 1.0, gauge(t, m.plans.WithLabelValues(string(plan.StateRunning))), "a failed List is no empty store")
	assert.Equal(t, 2.0, gauge(t, m.reboots.WithLabelValues("pending")))
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var out dto.Metric
	if err := g.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetGauge().GetValue()
}

// TestMetricsShowHeldPlans: a plan that waits shows in
// rebootctl_plans_waiting by what holds it (a failing blocking condition,
// a closed maintenance window, ...), and leaves it when it moves again
// (issue 38, point 16; old code: no metric showed a held or blocked
// plan, only its state, "running").
func TestMetricsShowHeldPlans(t *testing.T) {
	m := newMetrics()
	held := plan.Plan{UUID: "p1", State: plan.StateRunning, Reboots: []plan.Reboot{{ServerUUID: "s1"}},
		Waiting: "waiting: blocking condition no-alerts fails (checked 3s ago)"}
	closed := plan.Plan{UUID: "p2", State: plan.StateRunning, Reboots: []plan.Reboot{{ServerUUID: "s2"}},
		Waiting: "waiting: outside the maintenance windows until Mon 2026-01-05 22:00 CET"}
	stopped := plan.Plan{UUID: "p3", State: plan.StateStopped, Reboots: []plan.Reboot{{ServerUUID: "s3"}}}
	m.observe([]plan.View{plan.FullView(held), plan.FullView(closed), plan.FullView(stopped)}, map[string]plan.View{}, nil)
	assert.Equal(t, 1.0, gauge(t, m.waiting.WithLabelValues("condition")))
	assert.Equal(t, 1.0, gauge(t, m.waiting.WithLabelValues("window")))
	assert.Equal(t, 1.0, gauge(t, m.waiting.WithLabelValues("stopped")), "a stopped plan is held by the operator")
	held.Waiting = ""
	m.observe([]plan.View{plan.FullView(held), plan.FullView(closed)}, map[string]plan.View{"p1": plan.FullView(held)}, nil)
	assert.Equal(t, 0.0, gauge(t, m.waiting.WithLabelValues("condition")), "moving again")
	assert.Equal(t, 0.0, gauge(t, m.waiting.WithLabelValues("stopped")))
	assert.Equal(t, "domain", waitReason("waiting: cn07 waits for rack r01: 1 server(s) offline there, limit 1"))
	assert.Equal(t, "concurrency", waitReason("waiting: 5 server(s) offline (5 rebooting, 0 down or unknown for other reasons), limit 5"))
	assert.Equal(t, "headnode", waitReason("waiting: reboot of cn3 waits for the headnode's services (for 10s, at most 1h0m0s)"))
	assert.Equal(t, "services", waitReason("waiting: reboot of cn3 waits for its services: the server is up, services not up (for 10s, at most 1h0m0s, then the reboot fails)"))
	assert.Equal(t, "services", waitReason("waiting: reboot of cn3 waits for its server to come back up after its power cycle (down for 10s since its job finished, at most 1h0m0s, then the reboot fails)"))
}
