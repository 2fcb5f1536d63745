package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestPlanAbandon: at -N 1 a server whose BMC never answers holds its
// plan until the job timeout; the operator abandons it with "plan abandon
// PLAN SERVER": its job ends failed at once (its last known state shown),
// the other server is rebooted and the plan ends, and nothing ever
// reaches the abandoned server's hardware (issue 38, A.1; old code: no
// such command, the plan waited for the hour of the job timeout).
func TestPlanAbandon(t *testing.T) {
	l := newLab(t, 2, 0, unreachableBMC(t, 0))
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--failure-budget", "1", "--target", "2", "--uuid", "ab-1", "--run")
	require.Equal(t, exitOK, code, errs)
	l.executor()
	l.waitFor("ab-1", "cn0's job to start", time.Minute, func(p plan.Plan) bool {
		return p.Reboots[0].Step == plan.StepJob
	})
	out, errs, code := l.ctl("plan", "abandon", "ab-1", "cn0")
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "abandoned cn0 in plan ab-1")
	assert.Contains(t, out, "its last known state:")
	p := l.waitFor("ab-1", "the plan to end", time.Minute, func(p plan.Plan) bool { return !p.Unfinished() })
	assert.Equal(t, plan.StepFailed, p.Reboots[0].Step, plan.Table(p))
	assert.Contains(t, p.Reboots[0].Error, "abandoned by the operator")
	assert.Equal(t, plan.StepDone, p.Reboots[1].Step, plan.Table(p))
	assert.Empty(t, l.powers[l.ids[0]].Truth(), "the abandoned server's power never changed")
	out, _, _ = l.ctl("plan", "show", "ab-1")
	assert.True(t, strings.Contains(out, "abandoned"), out)

	_, errs, code = l.ctl("plan", "abandon", "ab-1", "nosuch")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "no server nosuch")
}
