//go:build e2e

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHeartbeatDuringLongPass (issue 38, B.14): a blocking condition
// takes 20 s, so every pass does; `plan show` never says the executor was
// last seen long ago ("nothing moves until one runs") while it works. Old
// code: the heartbeat was written after a whole pass only, and show warned
// of a stale executor half-way through the second pass.
func TestHeartbeatDuringLongPass(t *testing.T) {
	l := newLab(t, 1, 0)
	const uuid = "e2e-long-pass"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r", "--condition", "slow=sleep 20")
	require.Equal(t, 0, code, errs)
	l.executorWith("executor-long-pass.log", nil)
	eventually(t, time.Minute, func() string {
		out, _, _ := l.ctl("plan", "show", uuid)
		if !strings.Contains(out, "executor: last seen") {
			return "show does not show the executor:\n" + out
		}
		return ""
	})
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		out, _, _ := l.ctl("plan", "show", uuid)
		require.NotContains(t, out, "WARNING: the executor was last seen", "while the executor runs a 20 s pass")
		require.Contains(t, out, "executor: last seen")
	}
}
