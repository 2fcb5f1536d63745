//go:build e2e

package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37u_GroupOperatorLockedOutAfterExecutorApplies: the store is
// shared through a group as in TestReview37t_GroupOperatorStopHaltsServiceExecutor
// (svc:ops 0660, its directory svc:ops 0770, svc not a member of ops). An
// operator's stop lands in FILE.commands while the executor holds the
// store, and the operator's rebootctl is interrupted before it opens the
// store (or the executor simply opens it first, as it does whenever it
// holds the store for a long write): the executor (svc) applies it, and
// rewrites FILE.commands (writeCmdFile: a new file of its own). likeStore
// gives that file the store's mode but not the store's group (svc is not
// a member of ops, so no chgrp; its owner is svc, so no bits for others):
// svc:nogroup 0660. From then on every command of every operator of the
// group (plan run, stop, cancel) fails reading FILE.commands (permission
// denied), until someone chowns the file: the operators cannot stop
// their plan. Ground truth: rebootctl run with the operator's uid.
func TestReview37u_GroupOperatorLockedOutAfterExecutorApplies(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	g := newGroupWorld(t, 0o770)
	e := g.e

	// The executor holds the store (a long write) while the operator's
	// stop lands; the operator's rebootctl is interrupted while it waits.
	hold, err := plan.OpenBolt(e.store)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stop := g.command(ctx, g.operator, "plan", "stop", "p1")
	require.NoError(t, stop.Start())
	deadline := time.Now().Add(15 * time.Second)
	for {
		raw, _ := os.ReadFile(cmdFilePath(e.store))
		if strings.Contains(string(raw), `"p1"`) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the operator's stop never landed in FILE.commands")
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	_ = stop.Wait()
	require.NoError(t, hold.Close())

	// The executor's next open applies it (plan show opens the store as
	// the executor does).
	out, err := g.command(context.Background(), g.service, "plan", "show", "p1").CombinedOutput()
	require.NoError(t, err, "the service user opens its store:\n%s", out)
	if fi, err := os.Stat(cmdFilePath(e.store)); err == nil {
		st := fi.Sys().(*syscall.Stat_t)
		t.Logf("FILE.commands after the executor applied the stop: uid %d gid %d mode %v", st.Uid, st.Gid, fi.Mode().Perm())
	}
	out, err = g.command(context.Background(), g.operator, "plan", "run", "p1").CombinedOutput()
	assert.NoError(t, err, "an operator of group ops runs p1 again after the executor applied the group's stop:\n%s", out)
	out, err = g.command(context.Background(), g.operator, "plan", "stop", "p1").CombinedOutput()
	assert.NoError(t, err, "an operator of group ops stops p1:\n%s", out)
}

// TestReview37u_GroupOperatorStopHaltsExecutorOpenDir: round 18's Low
// (a group operator's side files keep the service user from its store)
// is fixed only when the store's directory lets no other user in
// (dirClosed). The same shared store in a directory others may enter
// (svc:ops 0775, the usual mode of a shared directory: others list it,
// and still cannot write the store, 0660) gets side files op:ops 0660
// from the operator's stop: the executor's user (svc, not in ops) cannot
// open FILE.commands.lock or read FILE.commands, and every open of its
// store fails until someone chowns them: no pass, no PlanCheck (jobs in
// flight may not power off, drained servers stay drained). README: "so
// that the executor's user keeps its store". rebootctl could refuse the
// command (saying why) rather than leave files the store's owner cannot
// open. Ground truth: rebootctl run with the service user's uid.
func TestReview37u_GroupOperatorStopHaltsExecutorOpenDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	g := newGroupWorld(t, 0o775)
	out, err := g.as(g.service, "plan", "show", "p1")
	require.NoError(t, err, "the service user reads its store before the stop:\n%s", out)
	out, err = g.as(g.operator, "plan", "stop", "p1")
	t.Logf("the operator's stop: err %v\n%s", err, out)
	out, err = g.as(g.service, "plan", "show", "p1")
	assert.NoError(t, err, "the service user (uid %d) opens its store after a stop given by an operator of the store's group:\n%s", groupSvc, out)
}
