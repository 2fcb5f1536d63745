package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// TestJobNeededOnlyUntilPlanRecordsEnd (issue 38, point 15): the
// executor keeps an ended job in the fleet state file while its plan may
// still read or create it (its reboot has not ended, or the plan could
// not be read), and lets it go once the plan recorded its end or is gone.
func TestJobNeededOnlyUntilPlanRecordsEnd(t *testing.T) {
	v := plan.View{Plan: plan.Plan{UUID: "p", Reboots: []plan.Reboot{
		{ServerUUID: "a", JobUUID: "ja", Step: plan.StepServices},
		{ServerUUID: "b", JobUUID: "jb", Step: plan.StepDone},
		{ServerUUID: "c", JobUUID: "jc", Step: plan.StepFailed},
	}}}
	views := map[string]plan.View{"p": v}
	job := func(plan, id string) inventory.JobRecord { return inventory.JobRecord{UUID: id, Plan: plan} }
	assert.True(t, jobNeeded(views, nil, nil, job("p", "ja")), "its reboot waits for the services")
	assert.False(t, jobNeeded(views, nil, nil, job("p", "jb")), "its reboot is done")
	assert.False(t, jobNeeded(views, nil, nil, job("p", "jc")), "its reboot failed for good")
	assert.False(t, jobNeeded(views, nil, nil, job("gone", "jx")), "its plan is gone")
	assert.True(t, jobNeeded(views, map[string]bool{"p": true}, nil, job("p", "jb")), "its plan's pass failed: unknown")
	assert.True(t, jobNeeded(views, nil, errors.New("list failed"), job("gone", "jx")), "the list failed: unknown")
}
