//go:build e2e

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAbandonInEndedPlanRefusedWhileAnotherRuns: "plan abandon" in a plan
// that has ended, while another plan reboots the server, is refused and
// names the running plan (review 38 round 4, unproven point: the abandon
// was recorded for the ended plan, replacing any abandon made in the
// running one, and the running plan's job took the server back at once:
// the operator's give-up was silently lost). In an ended plan no other
// plan runs the server in, it is still accepted (the fleet may still
// reconcile a server its ended job left).
func TestAbandonInEndedPlanRefusedWhileAnotherRuns(t *testing.T) {
	l := newLab(t, 2, 0)
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", "old-1")
	require.Equal(t, exitOK, code, errs)
	_, errs, code = l.ctl("plan", "cancel", "old-1")
	require.Equal(t, exitOK, code, errs)
	_, errs, code = l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", "new-2", "--run")
	require.Equal(t, exitOK, code, errs)

	out, errs, code := l.ctl("plan", "abandon", "old-1", "cn0")
	assert.Equal(t, exitUsage, code, "abandon in the ended plan old-1 while new-2 reboots cn0 accepted:\n%s%s", out, errs)
	assert.Contains(t, errs, "rebootctl plan abandon new-2 cn0", "the message names the plan to give")

	_, errs, code = l.ctl("plan", "cancel", "new-2")
	require.Equal(t, exitOK, code, errs)
	out, errs, code = l.ctl("plan", "abandon", "old-1", "cn0")
	assert.Equal(t, exitOK, code, "abandon in an ended plan, no other plan running cn0:\n%s%s", out, errs)
}
