package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// metrics are the executor's Prometheus metrics, on a registry of their
// own (no process-wide state).
type metrics struct {
	reg       *prometheus.Registry
	plans     *prometheus.GaugeVec
	reboots   *prometheus.GaugeVec
	waiting   *prometheus.GaugeVec
	bmcErrors *prometheus.CounterVec
	pass      prometheus.Histogram
	lastPass  prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		plans: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rebootctl_plans",
			Help: "Plans in the store, by state."}, []string{"state"}),
		reboots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rebootctl_reboots",
			Help: "Reboots of the plans that are not finished, by step (pending, job, wait_services, done, failed, ...)."}, []string{"step"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rebootctl_plans_waiting",
			Help: "Plans not finished that start no reboot now, by what holds them: stopped (by an operator), condition (a blocking condition fails), window (outside the maintenance windows), headnode, services (a server back up whose services are not, or not back up after its job), domain (a failure domain is full), concurrency, shard, other."}, []string{"reason"}),
		bmcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rebootctl_bmc_errors_total",
			Help: "BMC calls that failed, by class (auth, unreachable, tls, timeout, busy, unsupported, config, failed); calls refused during a login back-off are not counted."}, []string{"class"}),
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rebootctl_pass_duration_seconds",
			Help: "How long one executor pass over every plan took.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rebootctl_last_successful_pass_timestamp_seconds",
			Help: "When the last executor pass without an error ended (Unix time)."}),
	}
	m.reg.MustRegister(m.plans, m.reboots, m.waiting, m.bmcErrors, m.pass, m.lastPass)
	for _, r := range waitReasons {
		m.waiting.WithLabelValues(r)
	}
	for _, c := range inventory.BMCClasses {
		m.bmcErrors.WithLabelValues(c) // every class shows, at 0
	}
	for _, s := range []plan.State{plan.StateCreated, plan.StateRunning, plan.StateStopped, plan.StateCanceled, plan.StateComplete, plan.StateFailed} {
		m.plans.WithLabelValues(string(s))
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) bmcError(class string) { m.bmcErrors.WithLabelValues(class).Inc() }

func (m *metrics) passDuration(d time.Duration) { m.pass.Observe(d.Seconds()) }

func (m *metrics) passOK(t time.Time) { m.lastPass.Set(float64(t.UnixNano()) / 1e9) }

// observe sets the plan and reboot gauges from the plans listed (their
// headers; left as they are when the list failed: listErr), the reboots
// of the unfinished ones counted from their index (views hold the passes'
// results).
func (m *metrics) observe(plans []plan.View, views map[string]plan.View, listErr error) {
	if listErr != nil {
		return // what the store held last stands: a failed read is no empty store
	}
	states := map[plan.State]int{}
	steps := map[string]int{}
	waits := map[string]int{}
	for _, p := range plans {
		states[p.State]++
		if !p.Unfinished() {
			continue
		}
		v, ok := views[p.UUID]
		if !ok {
			v = p
		}
		switch {
		case v.State == plan.StateStopped:
			waits["stopped"]++
		case v.State == plan.StateRunning && v.Waiting != "":
			waits[waitReason(v.Waiting)]++
		}
		ix := v.Index
		steps["pending"] += ix.Total - ix.Started
		steps[string(plan.StepDone)] += ix.Done
		steps[string(plan.StepFailed)] += ix.Failed
		steps[string(plan.StepReleased)] += ix.Released
		for _, r := range v.Reboots {
			if r.Step.InFlight() {
				steps[string(r.Step)]++
			}
		}
	}
	m.plans.Reset()
	for _, s := range []plan.State{plan.StateCreated, plan.StateRunning, plan.StateStopped, plan.StateCanceled, plan.StateComplete, plan.StateFailed} {
		m.plans.WithLabelValues(string(s)).Set(float64(states[s]))
	}
	m.waiting.Reset()
	for _, r := range waitReasons {
		m.waiting.WithLabelValues(r).Set(float64(waits[r]))
	}
	m.reboots.Reset()
	for _, s := range []string{"pending", string(plan.StepWaitHead), string(plan.StepFreeze), string(plan.StepJob), string(plan.StepServices),
		string(plan.StepUnfreeze), string(plan.StepCancelJob), string(plan.StepFailFreeze), string(plan.StepDone), string(plan.StepFailed), string(plan.StepReleased)} {
		m.reboots.WithLabelValues(s).Set(float64(steps[s]))
	}
}

// waitReasons are the labels of rebootctl_plans_waiting.
var waitReasons = []string{"stopped", "condition", "window", "headnode", "services", "job", "domain", "concurrency", "shard", "other"}

// waitReason is what holds a plan, from its waiting message (plan.Plan's
// Waiting), as a label of few values.
func waitReason(waiting string) string {
	switch {
	case strings.Contains(waiting, "blocking condition"):
		return "condition"
	case strings.Contains(waiting, "maintenance window"):
		return "window"
	case strings.Contains(waiting, "headnode"):
		return "headnode"
	case strings.Contains(waiting, "its services"), strings.Contains(waiting, "its server to come back up"):
		return "services"
	case strings.Contains(waiting, "waits for its job"):
		return "job"
	case strings.Contains(waiting, "offline there"):
		return "domain"
	case strings.Contains(waiting, "server(s) offline"):
		return "concurrency"
	case strings.Contains(waiting, "database shard"):
		return "shard"
	}
	return "other"
}
