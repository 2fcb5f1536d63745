package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestSideFiles_LateReplayNeverUndoesLaterStop: a side file the applier
// may not rewrite is applied and left as it is (applyUnmarked), so its
// records are applied again by later opens. One applied once (root's
// `plan run`, interrupted, applied by the service executor, which cannot
// mark it) must not land again later, after an operator's stop given
// since (applied to the store directly): the run recorded before the
// stop would undo it and restart the plan (onceRecorded finds it in the
// plan's commands). Ground truth: the plan's state read from the store
// itself after root's next open of the store (which rewrites the side
// file, marking the run applied).
func TestSideFiles_LateReplayNeverUndoesLaterStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the service user and an operator of its group")
	}
	const svc, nogroup, ops, op = 65534, 65534, 4242, 4343
	// sudo rebootctl plan run p1 (running already), interrupted. The
	// service executor's next open applies it (refused: p1 runs) and
	// cannot rewrite the file.
	e, log := unmarkedRunWorld(t, svc, nogroup, ops)
	assert.Contains(t, log.String(), "left as it is", "the executor says what it did")
	requireOneUnmarked(t, e.store)
	// An operator of the group stops p1: to the store directly.
	time.Sleep(time.Millisecond)
	asUser(t, op, op, []int{ops}, func() {
		o := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}}
		v, err := o.operatorCommand("stop", "p1")
		require.NoError(t, err)
		require.Equal(t, plan.StateStopped, v.State)
	})
	// Root's next command opens the store: the run recorded before the
	// stop is not applied after it.
	st, err := e.openStore()
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "p1's state after a run recorded before the operator's stop was applied again")
	c, err := readCmdFile(e.store)
	require.NoError(t, err)
	require.Len(t, c.Records, 1)
	assert.True(t, c.Records[0].Applied, "root marked it")
	assert.Empty(t, c.Records[0].Kind, "applied (by the executor), not refused")
}

// TestSideFiles_ForeignFileSaidOnce: the executor ignores another user's
// FILE.commands at every open of the store, and says so once (naming the
// file's owner and the fix), not at every open; the operator's command
// says so once too, and that the command went to the store directly.
func TestSideFiles_ForeignFileSaidOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	e, fleet, clk := review37vTmpWorld(t, 3)
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	for range 3 {
		_, err := ex.Pass(e.ctx, "p1")
		require.NoError(t, err)
	}
	log := e.errw.(*bytes.Buffer).String()
	assert.Equal(t, 1, strings.Count(log, "may not use the plan store"), "said once in the executor's log:\n%s", log)
	assert.Contains(t, log, "uid 4545", "names the file's owner")
	assert.Contains(t, log, "remove it", "says the fix")
	var msg bytes.Buffer
	ops := &env{ctx: e.ctx, store: e.store, errw: &msg}
	_, err := ops.operatorCommand("stop", "p1")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(msg.String(), "may not use the plan store"), "said once by the command:\n%s", msg.String())
	assert.Contains(t, msg.String(), "applied to the store directly")
}
