package inventory

import (
	"context"
	"testing"
	"time"
)

// TestReview38g_CommandTimeoutBoundsWrapperScript: the doc says the
// executor's own reboot command "may hang up to the command timeout" (and
// while it runs, selfCmds holds every other power-off of the fleet). A
// reboot (or drain/undrain) command that is a wrapper script whose child
// keeps the output pipe open is not bounded: exec.CommandContext kills the
// script at the timeout, but CombinedOutput waits for the pipe to close
// (no cmd.WaitDelay), i.e. for the grandchild to exit. Here the command
// timeout is 1s and the script's child sleeps 20s: the command must return
// within a few seconds of its timeout, and the fleet must hold the other
// servers' power-offs no longer than that.
func TestReview38g_CommandTimeoutBoundsWrapperScript(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	self := ids[0]
	w.inv.Servers[0].Reboot = []string{"sh", "-c", "sleep 20; echo rebooted"}
	w.self = self
	w.open()
	defer func() { w.close() }()
	w.f.opts.command = nil // the real command runner
	w.f.inv.Defaults.CommandTimeout = Duration(time.Second)

	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.f.command(context.Background(), w.inv.Servers[0].Reboot) }()
	select {
	case <-done:
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("command with a 1s command timeout returned after %s", el)
		}
	case <-time.After(6 * time.Second):
		t.Fatalf("a reboot command with command_timeout 1s still runs %s later: its script was killed but its child holds the output pipe "+
			"(exec.CommandContext + CombinedOutput without WaitDelay); while a self reboot command runs (selfCmds) every other power-off is held, "+
			"so the cut-off 'up to the command timeout' is not bounded", time.Since(start).Round(time.Second))
	}
}
