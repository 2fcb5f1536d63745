//go:build e2e

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview37ac_NonPositiveIntervalPanicsExecutor: `rebootctl executor
// --interval 0s` (or a negative interval) is accepted by the flag
// checks (--pass-timeout and --shutdown-max are checked, --interval is
// not), the executor claims the store's lease, opens its fleet and, at
// its first pass, beatDuring's time.NewTicker(interval) panics
// ("non-positive interval for NewTicker") in a goroutine: the process
// dies with a Go panic and a stack trace instead of a usage error, and
// its lease is never released (no deferred release runs). An interval
// that is not positive must be refused as a usage error before anything
// is claimed. Ground truth: the process's own exit and output.
func TestReview37ac_NonPositiveIntervalPanicsExecutor(t *testing.T) {
	l := newLab(t, 2, 0)
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", "p-interval")
	require.Equal(t, 0, code, errs)
	for _, iv := range []string{"0s", "-1s"} {
		cmd, logPath := l.executorWith("executor-interval"+iv+".log", nil, "--interval", iv)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			log, _ := os.ReadFile(logPath)
			var ee *exec.ExitError
			code := 0
			if assert.ErrorAs(t, err, &ee, "--interval %s: exit: %v", iv, err) {
				code = ee.ExitCode()
			}
			assert.NotContains(t, string(log), "panic:", "--interval %s: the executor died of a Go panic instead of refusing the flag:\n%s", iv, firstLines(string(log), 4))
			assert.Contains(t, string(log), "--interval", "--interval %s: no usage error names the flag (exit %d)", iv, code)
		case <-time.After(20 * time.Second):
			t.Errorf("--interval %s: the executor was not refused (still running after 20 s)", iv)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
