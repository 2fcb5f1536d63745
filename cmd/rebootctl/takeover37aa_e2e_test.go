//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestTakeOverAfterAbandonRecordsFailed (review 37 round 24): the way out
// the refusal names works. An executor dies with cn0's reboot in flight
// in its fleet state file (its BMC refuses the password); one with
// another fleet state file is refused, naming cn0 and its plan and
// `rebootctl plan abandon`; the operator abandons cn0 in that plan; the
// executor with another file is then let in, and records cn0's reboot
// failed (abandoned), never done: its job is not in that file, and
// nothing rebooted the server. Ground truth: the BMC's power history
// (no power-off) and the plan read from the store.
func TestTakeOverAfterAbandonRecordsFailed(t *testing.T) {
	l := newLab(t, 1, 0)
	id := l.ids[0]
	const uuid = "e2e-takeover-abandon"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, exitOK, code, errs)
	wrong := []string{"E2E_BMC_PASSWORD=wrong-password"}
	first, _ := l.executorWith("first.log", wrong)
	l.waitFor(uuid, "the reboot's job", time.Minute, func(p plan.Plan) bool { return p.Reboots[0].JobSeen })
	require.NoError(t, first.Process.Kill())
	_, _ = first.Process.Wait()

	other := filepath.Join(l.dir, "other.fleet")
	second, logPath := l.executorWith("second.log", nil, "--state", other)
	require.Error(t, second.Wait(), "refused while cn0's job is in the first file")
	log, _ := os.ReadFile(logPath)
	assert.Contains(t, string(log), "cn0 (plan "+uuid+")")
	assert.Contains(t, string(log), "rebootctl plan abandon PLAN SERVER")

	out, errs, code := l.ctl("plan", "abandon", uuid, "cn0")
	require.Equal(t, exitOK, code, errs)
	t.Logf("abandon: %s", out)

	third, _ := l.executorWith("third.log", nil, "--state", other)
	p := l.waitFor(uuid, "cn0's reboot to end", 30*time.Second, func(p plan.Plan) bool { return p.Reboots[0].Step.Ended() })
	assert.True(t, processRuns(third.Process.Pid), "the executor with another file runs once cn0 is given up")
	assert.Equal(t, plan.StepFailed, p.Reboots[0].Step, "cn0 was never rebooted: %s", plan.Table(p))
	assert.Contains(t, p.Reboots[0].Error, "abandoned")
	assert.Zero(t, l.offs()[id], "nothing powered cn0 off")
}
