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
	m.observe([]plan.Plan{p}, map[string]plan.View{}, nil)
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
