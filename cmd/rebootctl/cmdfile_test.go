package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// cmdFileWorld is a bbolt store with one running plan of three servers,
// the executor's store (lockedStore) on it, and the fake fleet.
func cmdFileWorld(t *testing.T) (*env, *fake.Fleet, *fake.Clock) {
	t.Helper()
	return storeWorld(t, quickServers(3, "%d"), plan.Count(1), "")
}

// TestCommandFileLandsWithoutTheStore (issue 37 point A1, bbolt; review
// round 16): a stop recorded next to the store while another process
// holds the store lands at once, and the executor's next store operation
// applies it before anything else: its pass starts no reboot (ground
// truth: the fake fleet's job creations). The commands are applied in
// the order they were given, each outcome recorded: a run after a cancel
// is refused (plan.ErrState), a command for a plan that is not there is
// refused (plan.ErrNotFound).
func TestCommandFileLandsWithoutTheStore(t *testing.T) {
	e, fleet, clk := cmdFileWorld(t)
	ctx := e.ctx
	holder, err := plan.OpenBolt(e.store) // another process holds the store
	require.NoError(t, err)
	start := time.Now()
	seq, err := recordCommand(ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the stop waited for the store")
	require.NoError(t, holder.Close())

	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err = ex.Pass(ctx, "p1")
	require.NoError(t, err)
	assert.Empty(t, fleet.JobsCreated(), "a reboot started after the stop landed")
	rec, found, err := commandOutcome(ctx, e.store, seq)
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, rec.Applied, "the executor's store applied the stop")
	assert.NoError(t, errOutcome(rec))
	v, err := e.operatorCommand("stop", "p1") // stopping a stopped plan is no error
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, v.State)

	cancelSeq, err := recordCommand(ctx, e.store, "p1", "cancel", time.Now().UTC())
	require.NoError(t, err)
	runSeq, err := recordCommand(ctx, e.store, "p1", "run", time.Now().UTC())
	require.NoError(t, err)
	v, err = e.commandOutcome("run", "p1", runSeq)
	require.ErrorIs(t, err, plan.ErrState, "a run given after a cancel")
	assert.Equal(t, plan.StateCanceled, v.State)
	rec, _, err = commandOutcome(ctx, e.store, cancelSeq)
	require.NoError(t, err)
	assert.True(t, rec.Applied)
	assert.NoError(t, errOutcome(rec), "the cancel, given first, was applied first")

	_, err = e.operatorCommand("stop", "nope")
	assert.ErrorIs(t, err, plan.ErrNotFound)
}

// TestCommandFileUnreadableStopsTheExecutor: a side file that cannot be
// read may hold a stop: no one uses the store (the executor's pass fails
// and starts nothing; ground truth: the fake fleet) until an operator
// looks at it, and the message says what to do.
func TestCommandFileUnreadableStopsTheExecutor(t *testing.T) {
	e, fleet, clk := cmdFileWorld(t)
	require.NoError(t, os.WriteFile(cmdFilePath(e.store), []byte("{not json"), 0o600))
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err := ex.Pass(e.ctx, "p1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "remove it and give the commands again")
	assert.Empty(t, fleet.JobsCreated())
	require.NoError(t, os.Remove(cmdFilePath(e.store)))
	_, err = ex.Pass(e.ctx, "p1")
	require.NoError(t, err)
	assert.Len(t, fleet.JobsCreated(), 1, "the plan runs again once the file is gone")
}
