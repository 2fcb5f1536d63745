package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestReview38_ExecutorShutdownMaxSettable (review 38 round 2): the fleet
// relies on inventory.Options.ShutdownMax ("an accepted power-off takes
// effect within ShutdownMax of being sent, or never"; a longer OS shutdown
// that ends after the fleet dropped the power cycle leaves the server off
// for good, nothing watching it). Its default is 2 × --soft-timeout
// (6 min), and rebootctl executor offers no way to set it apart from
// --soft-timeout (which also delays every hard power-off): an operator
// whose servers take longer to shut down (firmware or OS updates applied
// at shutdown) cannot widen the bound without slowing every reboot.
func TestReview38_ExecutorShutdownMaxSettable(t *testing.T) {
	var out, errw bytes.Buffer
	run(context.Background(), []string{"executor", "-h"}, &out, &errw)
	help := out.String() + errw.String()
	if !strings.Contains(help, "soft-timeout") {
		t.Fatalf("no executor help printed: %q", help)
	}
	if !strings.Contains(help, "shutdown-max") {
		t.Errorf("rebootctl executor has no flag for inventory.Options.ShutdownMax:\n%s", help)
	}
}
