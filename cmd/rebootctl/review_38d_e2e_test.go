//go:build e2e

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview38_AbandonedServerRemovedStallsExecutor (review 38 round 4):
// cn0's BMC is dead; the operator abandons cn0 ("plan abandon ab-1 cn0"),
// the plan ends, and then, as one does with a dead server given up on,
// takes cn0 out of the inventory and restarts the executor (allowed: no
// live job, no unsettled power cycle the fleet would finish). The abandon
// stays recorded in the plan store (metaAbandoned, never cleared), and
// every pass begins by applying it (passAll -> applyAbandoned ->
// Fleet.Abandon), which fails for a server the inventory lacks ("no
// server ... in the inventory"): every pass fails before it runs any plan,
// for good. A new plan of the two remaining servers never starts.
// Expected: an abandon of a server the inventory no longer lists is
// skipped (it is the operator's, and the executor cannot power it
// anyway), and the plan ends.
func TestReview38_AbandonedServerRemovedStallsExecutor(t *testing.T) {
	l := newLab(t, 3, 0, unreachableBMC(t, 0))
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--failure-budget", "1", "--target", "2", "--uuid", "ab-1", "--run")
	require.Equal(t, exitOK, code, errs)
	first := l.executor()
	l.waitFor("ab-1", "cn0's job to start", time.Minute, func(p plan.Plan) bool {
		return p.Reboots[0].Step == plan.StepJob
	})
	_, errs, code = l.ctl("plan", "abandon", "ab-1", "cn0")
	require.Equal(t, exitOK, code, errs)
	l.waitFor("ab-1", "the plan to end", time.Minute, func(p plan.Plan) bool { return !p.Unfinished() })
	require.NoError(t, first.Process.Kill())
	_, _ = first.Process.Wait()

	// The operator removes the dead server from the inventory.
	raw, err := os.ReadFile(l.inv)
	require.NoError(t, err)
	blocks := strings.Split(string(raw), "\n  - uuid: ")
	var kept []string
	for i, b := range blocks {
		if i > 0 && strings.HasPrefix(b, l.ids[0]) {
			continue
		}
		kept = append(kept, b)
	}
	require.Len(t, kept, len(blocks)-1, "cn0's block found")
	require.NoError(t, os.WriteFile(l.inv, []byte(strings.Join(kept, "\n  - uuid: ")), 0o600))

	_, errs, code = l.ctl("plan", "create", "--all", "-N", "1", "--target", "3", "--uuid", "ab-2", "--run")
	require.Equal(t, exitOK, code, errs)
	l.executor()
	p := l.waitFor("ab-2", "the plan of the remaining servers to end", time.Minute, func(p plan.Plan) bool { return !p.Unfinished() })
	for _, r := range p.Reboots {
		require.Equal(t, plan.StepDone, r.Step, plan.Table(p))
	}
}
