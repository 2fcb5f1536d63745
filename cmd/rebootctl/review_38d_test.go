package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview38_ShutdownMaxBelowSoftTimeoutRefused (review 38 round 4):
// --soft-timeout says a soft shutdown may take that long before the hard
// power-off (the reboot package's A2: it ends within SoftTimeout or
// never), and --shutdown-max bounds how long after it was sent an accepted
// power-off may still land ("too short, and a shutdown that ends later
// leaves its server off for good", its own help). A --shutdown-max below
// --soft-timeout contradicts the reboot package's own assumption (a soft
// shutdown of 2 min is normal at --soft-timeout 3m, yet past a 1 min
// --shutdown-max the fleet stops watching the server and frees its slot)
// and is accepted silently. Expected: refused (or raised to the soft
// timeout) with a usage error naming both flags.
func TestReview38_ShutdownMaxBelowSoftTimeoutRefused(t *testing.T) {
	dir := t.TempDir()
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"executor", "--soft-timeout", "3m", "--shutdown-max", "1m",
		"--inventory", filepath.Join(dir, "missing.yaml"), "--store", filepath.Join(dir, "plans.db"), "--state", filepath.Join(dir, "fleet.db")}, &out, &errw)
	msg := out.String() + errw.String()
	if code != exitUsage || !strings.Contains(msg, "shutdown-max") {
		t.Fatalf("--shutdown-max 1m below --soft-timeout 3m not refused as a usage error (exit %d):\n%s", code, msg)
	}
}
