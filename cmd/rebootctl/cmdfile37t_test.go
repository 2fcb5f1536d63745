package main

import (
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestCmdFile_RecordedInvalidUUIDIsRefused: a record whose plan UUID is
// no plan UUID (written by an older rebootctl, which recorded without
// checking, or by hand) is recorded refused when the store opens, and the
// store stays usable: a later valid stop is applied.
func TestCmdFile_RecordedInvalidUUIDIsRefused(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	seq, err := recordCommand(e.ctx, e.store, "p1 ", "stop", time.Now().UTC())
	require.NoError(t, err)
	st, err := e.openStore()
	require.NoError(t, err, "a recorded command with an invalid UUID stops every open of the store")
	require.NoError(t, st.Close())
	rec, found, err := commandOutcome(e.ctx, e.store, seq)
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, rec.Applied)
	assert.Equal(t, "invalid_uuid", rec.Kind)
	assert.ErrorIs(t, errOutcome(rec), plan.ErrInvalidUUID)
	v, err := e.operatorCommand("stop", "p1")
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, v.State)
}

// TestCmdFile_OperatorTypoNotRecorded: `plan stop 'p1 '` is refused before
// anything is recorded, and its message names the rule.
func TestCmdFile_OperatorTypoNotRecorded(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	_, err := e.operatorCommand("stop", "p1 ")
	require.ErrorIs(t, err, plan.ErrInvalidUUID)
	assert.Contains(t, explain(err, "p1 "), "is not a plan UUID")
	assert.NoFileExists(t, cmdFilePath(e.store))
}

// TestCmdFile_PendingFollowsTheFile: lockedStore.CommandPending says a
// command of the plan waits from the moment it is recorded until this
// executor reads the plan's state again (through an open that applied
// it), whoever applied it: an open by another process (the operator's
// own rebootctl) applies it but the executor's view is still older than
// the command. Another plan's command is not this plan's; a command
// recorded after the executor's read is pending again; a side file
// removed (its numbers start again) does not hide a new command.
func TestCmdFile_PendingFollowsTheFile(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	s := lockedStore{e}
	pending := func(uuid string) bool {
		t.Helper()
		ok, err := s.CommandPending(e.ctx, uuid)
		require.NoError(t, err)
		return ok
	}
	readP1 := func() {
		t.Helper()
		_, err := s.GetHead(e.ctx, "p1")
		require.NoError(t, err)
	}
	assert.False(t, pending("p1"), "no side file yet")
	readP1()
	_, err := recordCommand(e.ctx, e.store, "p2", "stop", time.Now().UTC())
	require.NoError(t, err)
	assert.False(t, pending("p1"), "p2's stop is not p1's")
	_, err = recordCommand(e.ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)
	assert.True(t, pending("p1"), "p1's stop landed")
	ops := &env{ctx: e.ctx, store: e.store} // the operator's own process
	st, err := ops.openStore()
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.True(t, pending("p1"), "p1's stop was applied by the operator's open, after the executor's read: still pending for the executor")
	readP1()
	assert.False(t, pending("p1"), "the executor read p1's state after its stop was applied")
	_, err = recordCommand(e.ctx, e.store, "p1", "run", time.Now().UTC())
	require.NoError(t, err)
	assert.True(t, pending("p1"), "p1's run landed after the executor's read")
	readP1()
	assert.False(t, pending("p1"), "the executor read p1's state after its run")
	// The file removed (as its error says to when it cannot be read) and
	// made again: its numbers start from 1, up to those seen already.
	require.NoError(t, os.Remove(cmdFilePath(e.store)))
	for _, p := range []string{"p1", "p2", "p2"} {
		_, err = recordCommand(e.ctx, e.store, p, "stop", time.Now().UTC())
		require.NoError(t, err)
	}
	assert.True(t, pending("p1"), "a stop recorded in a side file made again (record 1 of 3, the executor saw 3 of the old file)")
	readP1()
	assert.False(t, pending("p1"), "the executor read p1's state after it")
}

// TestCmdFile_OutcomesKeptUntilExpiry: recordCommand keeps every applied
// record (of the same plan too) younger than keepOutcomes, drops older
// ones, and keeps a command not applied whatever its age.
func TestCmdFile_OutcomesKeptUntilExpiry(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	now := time.Now().UTC()
	old, err := recordCommand(e.ctx, e.store, "p1", "stop", now.Add(-keepOutcomes-time.Hour))
	require.NoError(t, err)
	recent, err := recordCommand(e.ctx, e.store, "p1", "run", now.Add(-time.Hour))
	require.NoError(t, err)
	st, err := e.openStore() // applies both
	require.NoError(t, err)
	require.NoError(t, st.Close())
	waiting, err := recordCommand(e.ctx, e.store, "gone", "stop", now.Add(-keepOutcomes-time.Hour))
	require.NoError(t, err)
	_, err = recordCommand(e.ctx, e.store, "p1", "stop", now)
	require.NoError(t, err)
	for seq, want := range map[int64]bool{old: false, recent: true, waiting: true} {
		_, found, err := commandOutcome(e.ctx, e.store, seq)
		require.NoError(t, err)
		assert.Equal(t, want, found, "record %d", seq)
	}
}

// TestCmdFile_ReapplyAfterCrashAppliesOnce: a stop written to the store
// by an applier killed before it marked the side file is not applied a
// second time by the next open: the plan holds one mark of it, and the
// operator is told it landed.
func TestCmdFile_ReapplyAfterCrashAppliesOnce(t *testing.T) {
	e, _, _ := review37sWorld(t, 3)
	at := time.Now().UTC()
	seq, err := recordCommand(e.ctx, e.store, "p1", "stop", at)
	require.NoError(t, err)
	bs, err := plan.OpenBolt(e.store)
	require.NoError(t, err)
	_, err = plan.CommandView(e.ctx, bs, "p1", plan.Record("stop", at, plan.Stop))
	require.NoError(t, err)
	require.NoError(t, bs.Close())
	v, err := e.commandOutcome("stop", "p1", seq)
	require.NoError(t, err)
	assert.Equal(t, plan.StateStopped, v.State)
	st, err := e.openStore()
	require.NoError(t, err)
	p, err := st.Get(e.ctx, "p1")
	require.NoError(t, st.Close())
	require.NoError(t, err)
	assert.Len(t, p.Commands, 1, "the stop is recorded in the plan once: %v", p.Commands)
}

// TestCmdFile_SideFilesGetTheStoresOwner: run as root (an operator's
// sudo), recordCommand and a waiting command make FILE.commands,
// FILE.commands.lock and FILE.wait with the store file's owner and mode,
// and give them back to it when they were root's (made by an older
// rebootctl). Ground truth: the files' stat.
func TestCmdFile_SideFilesGetTheStoresOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the operator's sudo")
	}
	const uid, gid = 65534, 65534
	e, _, _ := review37sWorld(t, 3)
	require.NoError(t, os.Chown(e.store, uid, gid))
	require.NoError(t, os.Chmod(e.store, 0o640))
	// A lock file an older rebootctl made as root.
	require.NoError(t, os.WriteFile(cmdFilePath(e.store)+".lock", nil, 0o600))
	_, err := e.operatorCommand("stop", "p1")
	require.NoError(t, err)
	for _, p := range []string{cmdFilePath(e.store), cmdFilePath(e.store) + ".lock", waitPath(e.store)} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{uid, gid}, [2]uint32{st.Uid, st.Gid}, "owner of %s", p)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "mode of %s", p)
	}
}

// TestCmdFile_ForeignSideFileSaysTheFix: a side file this user may not
// open (another user's, made before side files had the store's owner)
// is reported with the fix: the chown, or the user to run as.
func TestCmdFile_ForeignSideFileSaysTheFix(t *testing.T) {
	err := sideFileError("/srv/rebootctl.db", &fs.PathError{Op: "open", Path: "/srv/rebootctl.db.commands.lock", Err: fs.ErrPermission})
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), "chown")
	assert.Contains(t, err.Error(), "/srv/rebootctl.db*")
}
