//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestTakeOverWithAnotherStateRefused (issue 38, A.8 and C): an executor
// dies (SIGKILL) while a reboot it started is in flight (its BMC refuses
// the password); an executor started with another fleet state file is
// refused, naming the state file that holds the job, and creates no job;
// one started with the first's state file resumes. Old code: the lease of
// a dead process lapsed at once and the second executor created the job
// again in its own state file (a second drain, and a second power cycle
// once the BMC answers).
func TestTakeOverWithAnotherStateRefused(t *testing.T) {
	l := newLab(t, 1, 0)
	const uuid = "e2e-takeover"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, exitOK, code, errs)
	wrong := []string{"E2E_BMC_PASSWORD=wrong-password"}
	first, _ := l.executorWith("first.log", wrong)
	l.waitFor(uuid, "the reboot's job", time.Minute, func(p plan.Plan) bool { return p.Reboots[0].JobSeen })
	require.NoError(t, first.Process.Kill())
	_, _ = first.Process.Wait()

	other := filepath.Join(l.dir, "other.fleet")
	second, logPath := l.executorWith("second.log", wrong, "--state", other)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		require.Error(t, err, "the second executor exits non-zero")
		log, _ := os.ReadFile(logPath)
		assert.Contains(t, string(log), "used another fleet state file")
		assert.Contains(t, string(log), l.store+".fleet")
		assert.Contains(t, string(log), "cn0 (plan "+uuid+")")
	case <-time.After(30 * time.Second):
		t.Fatal("an executor with another state file took over a store whose reboot is in flight")
	}
	if raw, err := os.ReadFile(other); err == nil {
		assert.NotContains(t, string(raw), l.get(uuid).Reboots[0].JobUUID, "the refused executor recorded the job")
	}

	third, _ := l.executorWith("third.log", wrong)
	time.Sleep(2 * time.Second)
	assert.True(t, processRuns(third.Process.Pid), "an executor with the first's state file resumes")
	out, _, _ := l.ctl("plan", "show", uuid)
	assert.True(t, strings.Contains(out, "executor: last seen"), out)
}
