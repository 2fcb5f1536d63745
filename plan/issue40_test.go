package plan_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/plan"
)

// TestInOtherPlanIsServerInPlan (issue 40, point 9): Create's refusal of a
// server in another unfinished plan matches ErrServerInPlan (what a
// store's Create returns for the same conflict), and the two texts say
// which check found it. They had the same text and did not match each
// other.
func TestInOtherPlanIsServerInPlan(t *testing.T) {
	o := opts()
	o.Existing = []plan.Plan{{UUID: "other", State: plan.StateRunning, Concurrency: 1, Reboots: []plan.Reboot{{ServerUUID: "u002"}}}}
	_, _, err := plan.Create(servers(1, 3), o)
	assert.ErrorIs(t, err, plan.ErrInOtherPlan)
	assert.ErrorIs(t, err, plan.ErrServerInPlan)
	assert.True(t, errors.Is(plan.ErrInOtherPlan, plan.ErrServerInPlan))
	assert.NotEqual(t, plan.ErrInOtherPlan.Error(), plan.ErrServerInPlan.Error())
}
