package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestStorePolicy: a plan's maintenance windows, ramp, domain limits,
// blocking conditions, the condition output it waits on and its servers'
// labels survive the store (whole plans and views), and a pass on a view
// of this store writes back what it decided (the store gives no domain
// table; the Executor reads it once per plan, the test builds it here).
func TestStorePolicy(t *testing.T) {
	ctx := context.Background()
	s := NewStore(newClient(t), prefix(t))
	var fleet []plan.Server
	for i := 0; i < 40; i++ {
		fleet = append(fleet, plan.Server{UUID: fmt.Sprintf("s%03d", i), Hostname: fmt.Sprintf("h%03d", i), Platform: "1",
			Labels: map[string]string{"rack": fmt.Sprintf("r%d", i/10)}})
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "pol", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(8),
		CreatedAt: time.Unix(1, 0).UTC(), Ramp: []plan.Limit{plan.Count(1), plan.Count(4)},
		DomainLimits: []plan.DomainLimit{{Label: "rack", Max: 1}},
		Conditions:   []plan.Condition{{Name: "no-alerts", Command: []string{"check"}}},
		Windows: &plan.Windows{TimeZone: "Europe/Berlin", Weekly: []string{"daily 00:00-24:00"}, Expect: time.Minute,
			Ranges: []plan.Range{{Start: time.Unix(0, 0).UTC(), End: time.Unix(3600, 0).UTC()}}}})
	require.NoError(t, err)
	p.State = plan.StateRunning
	p.WaitingOutput = "ALERT firing"
	require.NoError(t, s.Create(ctx, p))
	got, err := s.Get(ctx, "pol")
	require.NoError(t, err)
	p.Version = got.Version
	assert.Equal(t, p, got)

	v, err := s.GetView(ctx, "pol")
	require.NoError(t, err)
	assert.Equal(t, p.Windows, v.Windows)
	assert.Equal(t, p.Ramp, v.Ramp)
	assert.Equal(t, p.DomainLimits, v.DomainLimits)
	assert.Equal(t, p.Conditions, v.Conditions)
	assert.Equal(t, "r0", v.Reboots[0].Labels["rack"])

	// A pass: everything up, the condition holds; the ramp allows one.
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	obs := plan.Observations{Partial: true, Servers: map[string]plan.ServerObs{}, HeadnodeServicesUp: true,
		Conditions: map[string]plan.ConditionResult{"no-alerts": {OK: true, At: now}}}
	for _, r := range v.Reboots {
		obs.Servers[r.ServerUUID] = plan.ServerObs{ServicesUp: true}
	}
	v.Domains = plan.DomainTableOf(got)
	w, acts := plan.Config{}.NextView(v, obs, now)
	require.Len(t, acts, 1, w.Waiting)
	require.NoError(t, s.PutView(ctx, w))
	got, err = s.Get(ctx, "pol")
	require.NoError(t, err)
	assert.Equal(t, plan.StepJob, got.Reboots[0].Step)
	assert.Empty(t, got.WaitingOutput)
	assert.Equal(t, "r0", got.Reboots[0].Labels["rack"])
}
