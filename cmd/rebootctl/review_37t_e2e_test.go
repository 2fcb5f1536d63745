//go:build e2e

package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview37t_GroupOperatorStopHaltsServiceExecutor: the store is shared
// through a group (svc:ops, mode 0660, its directory svc:ops 0770, not
// setgid); an operator of group ops (not root) gives `plan stop`. The side
// files it makes get the store's mode (likeStore) but keep the operator's
// own uid and primary group: FILE.commands.lock and FILE.commands become
// op:op 0660, which the service user (the executor's, who owns the store)
// may not open. From then on every open of the store by the executor
// fails, for good, until someone chowns the files. likeStore could give
// them the store's group (a member may chgrp). Ground truth: rebootctl run
// with the service user's uid (plan show opens the store as the executor
// does), after the stop.
func TestReview37t_GroupOperatorStopHaltsServiceExecutor(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	g := newGroupWorld(t, 0o770)
	out, err := g.as(g.service, "plan", "show", "p1")
	require.NoError(t, err, "the service user reads its store before the stop:\n%s", out)
	out, err = g.as(g.operator, "plan", "stop", "p1")
	require.NoError(t, err, "the operator of group ops stops p1:\n%s", out)
	out, err = g.as(g.service, "plan", "show", "p1")
	assert.NoError(t, err, "the service user (uid %d) opens its store after a stop given by an operator of the store's group:\n%s", groupSvc, out)
}
