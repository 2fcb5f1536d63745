package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// TestPeerTextNeverReachesTerminalRaw: a BMC's error holding escape
// sequences (clipboard write, clear screen, window title) is shown by
// watch without a control character (issue 38, 12; old code: printed
// raw).
func TestPeerTextNeverReachesTerminalRaw(t *testing.T) {
	evil := "refused \x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;owned\x07\u009b31m done"
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := plan.FullView(plan.Plan{UUID: "p1", State: plan.StateRunning, Concurrency: 1,
		Reboots: []plan.Reboot{{ServerUUID: "u0", ServerHostname: "cn0", Step: plan.StepJob, Error: evil}}})
	ex := &executorStatus{Host: "h", PID: 1, At: now, Interval: time.Second, PassError: evil,
		Servers: []inventory.ServerStatus{{UUID: "u0", Hostname: "cn0", Phase: evil, LastError: &inventory.BMCError{Class: inventory.BMCAuth, Message: evil, At: now}}}}
	lines := render(v, ex, "store.db", now)
	out := strings.Join(lines, "\n")
	if !strings.Contains(out, "owned") {
		t.Fatalf("the BMC's error is not shown at all:\n%s", out)
	}
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0) {
			t.Fatalf("control character %U reaches the terminal:\n%q", r, out)
		}
	}
}
