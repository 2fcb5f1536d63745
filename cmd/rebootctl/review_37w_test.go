package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// review37wTmpWorld is review37vTmpWorld (a running plan p1 in a store of
// the service user, uid 65534, mode 0600, in a sticky world-writable
// directory), with the directories above it open for the service user to
// reach, and instead of another user's FILE.commands, another local user's
// (uid 4545) FILE.commands.tmp: the temporary file writeCmdFile renames
// over FILE.commands, which no rule of the side files looks at.
func review37wTmpWorld(t *testing.T) *env {
	t.Helper()
	const mallory = 4545
	e, _, _ := review37vTmpWorld(t, 3)
	dir := filepath.Dir(e.store)
	// Sticky, as /tmp is (os.Chmod(dir, 0o1777), review37vTmpWorld's,
	// sets no sticky bit: os.FileMode's is os.ModeSticky).
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755))
	require.NoError(t, os.Remove(cmdFilePath(e.store)))
	tmp := cmdFilePath(e.store) + ".tmp"
	require.NoError(t, os.WriteFile(tmp, nil, 0o644))
	require.NoError(t, os.Chown(tmp, mallory, mallory))
	return e
}

// storeState is plan uuid's state read from the store itself (no side
// file applied).
func storeState(t *testing.T, store, uuid string) plan.State {
	t.Helper()
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	h, herr := bs.GetHead(t.Context(), uuid)
	require.NoError(t, bs.Close())
	require.NoError(t, herr)
	return h.State
}

// TestReview37w_ForeignTmpFileLocksOutStop: round 20's one rule
// (sideUsable) looks at FILE.commands and FILE.commands.lock only. In a
// sticky world-writable directory (review37vTmpWorld's), any local user
// may make FILE.commands.tmp first; writeCmdFile removes it before making
// its own (os.Remove), which the sticky bit refuses to anyone but its
// owner, the directory's owner and root. So the store's own user (the
// service user, as `sudo -u rebootctl rebootctl plan stop` or its unit's
// operator runs it) passes sideUsable, records nothing (recordCommand →
// withCmdFile → writeCmdFile fails with EPERM), and its stop fails:
// never recorded, never applied directly, for as long as the file stays.
// Ground truth: p1's state read from the store itself.
func TestReview37w_ForeignTmpFileLocksOutStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	const svc = 65534
	e := review37wTmpWorld(t)
	var err error
	asUser(t, svc, svc, []int{}, func() {
		ops := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}}
		_, err = ops.operatorCommand("stop", "p1")
	})
	assert.NoError(t, err, "the store owner's stop, with another user's FILE.commands.tmp next to the store")
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "p1's state in the store after its owner's stop")
}

// TestReview37w_ForeignTmpFileStallsExecutor: the same file keeps the
// service user's executor from its store once a command waits in
// FILE.commands (recorded by root's `sudo rebootctl plan stop p1`,
// interrupted before it opened the store, or by the executor's user
// before the file was made): applyCommands must rewrite FILE.commands to
// mark the stop applied, writeCmdFile cannot remove the other user's
// FILE.commands.tmp, the open fails, and so does every open of the store
// by the executor from then on: no pass of any plan runs, nothing in
// flight is observed, nothing held is released, and the stop is never
// applied. Ground truth: the pass's error and p1's state read from the
// store itself.
func TestReview37w_ForeignTmpFileStallsExecutor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	const svc = 65534
	e := review37wTmpWorld(t)
	// Root records the stop as the service user could not now: aside.
	tmp := cmdFilePath(e.store) + ".tmp"
	require.NoError(t, os.Rename(tmp, tmp+".aside"))
	_, err := recordCommand(e.ctx, e.store, "p1", "stop", time.Now().UTC()) // sudo rebootctl plan stop p1, interrupted
	require.NoError(t, err)
	require.NoError(t, os.Rename(tmp+".aside", tmp)) // the other user's file, as it was
	var perr error
	asUser(t, svc, svc, []int{}, func() {
		perr = lockedStore{e}.with(func(*plan.BoltStore) error { return nil }) // any open of the executor's
	})
	assert.NoError(t, perr, "the service executor's open of its store, with another user's FILE.commands.tmp next to it")
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "p1's state in the store after the executor's open")
}

// TestReview37w_ReplayAfter100CommandsUndoesStop: a side file the
// applier may not rewrite is applied again at every open (applyUnmarked),
// and onceRecorded keeps a record from landing twice only while the plan's
// Commands still hold it; but Commands keeps the last plan.MaxCommands
// (100) only (plan.Record). Root's `plan run p1` (interrupted, applied by
// the service executor, which cannot mark it: TestSideFiles_LateReplay-
// NeverUndoesLaterStop's layout) stays unmarked for as long as no root
// command comes; the group's operators, whose commands go to the store
// directly and cannot mark it either, pause and resume p1 49 times
// (a nightly pause, a script), then stop it (twice: two operators, or
// one who was not sure it took; 100 commands since root's run). The executor's next open
// applies the old run again (no longer in Commands): p1 runs again, its
// reboots start, after the operator was told "stopped". The side files'
// doc: "a command applied again changes nothing"; e40d9ed: "a side file
// left as it is never undoes a later command when applied again". Ground
// truth: p1's state read from the store itself after the executor's open.
func TestReview37w_ReplayAfter100CommandsUndoesStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the service user and an operator of its group")
	}
	const svc, nogroup, ops, op = 65534, 65534, 4242, 4343
	// sudo rebootctl plan run p1, interrupted; the service executor's
	// next open applies it and cannot rewrite the file.
	e, _ := unmarkedRunWorld(t, svc, nogroup, ops)
	executorOpen := func() { executorOpenAs(t, e, svc, nogroup) }
	requireOneUnmarked(t, e.store)

	// The group's operators: stop and run p1 fifty times, then stop it.
	asUser(t, op, op, []int{ops}, func() {
		o := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}}
		for range 49 {
			for _, name := range []string{"stop", "run"} {
				_, err := o.operatorCommand(name, "p1")
				require.NoError(t, err)
			}
		}
		_, err := o.operatorCommand("stop", "p1")
		require.NoError(t, err)
		v, err := o.operatorCommand("stop", "p1") // a second operator's, or the same one again
		require.NoError(t, err)
		require.Equal(t, plan.StateStopped, v.State, "the operator is told p1 stopped")
	})
	require.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"))

	executorOpen() // the executor's next read or write
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "p1's state after the executor's next open: root's old run applied again")
}

// review37wFifo makes path a FIFO of another local user (uid 4545, mode
// 0644: anyone may open it to read).
func review37wFifo(t *testing.T, path string) {
	t.Helper()
	const mallory = 4545
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	require.NoError(t, os.Chown(path, mallory, mallory))
}

// returnsWithin runs f and says whether it returned within d. A call
// left blocked in an open of the FIFO at fifo is released when the test
// ends (the FIFO opened for writing, as often as it takes), and waited
// for, before the test's directories are removed.
func returnsWithin(t *testing.T, fifo string, d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	t.Cleanup(func() {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
	})
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestReview37w_FifoCommandsFileHangsStop: the side files are opened
// without O_NONBLOCK (openSide), and checked (checkSide: a regular file)
// only once open; an open for reading of a FIFO blocks until someone
// opens it for writing. In a sticky world-writable directory any local
// user may make FILE.commands a FIFO (mkfifo -m 644; fs.protected_fifos
// guards O_CREAT opens only). sideUsable refuses it, so the operator's
// stop goes to the store directly; openStore opens the store (its lock
// held) and applyCommands → applyUnmarked → readCmdFile → readSide opens
// the FIFO to read it: the stop hangs for ever, holding the store's lock,
// and every later command and the executor wait for that lock. The store
// itself is opened with O_NONBLOCK for this very reason (ownfile.Opener).
// Ground truth: whether root's `plan stop` returned within 5 s, and p1's
// state in the store.
func TestReview37w_FifoCommandsFileHangsStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as another local user")
	}
	e := review37wTmpWorld(t)
	review37wFifo(t, cmdFilePath(e.store))
	var err error
	ok := returnsWithin(t, cmdFilePath(e.store), 5*time.Second, func() {
		ops := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}} // sudo rebootctl plan stop p1
		_, err = ops.operatorCommand("stop", "p1")
	})
	require.True(t, ok, "the operator's stop hangs: another user's FIFO at FILE.commands is opened to be read, with the store locked")
	assert.NoError(t, err)
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"))
}

// TestReview37w_FifoCommandsFileHangsExecutor: the same FIFO hangs the
// executor's pass: its first read of the store (lockedStore.with →
// waitStoreNext → applyCommands → applyUnmarked → readSide) blocks in the
// open with the store locked, and so does CommandPending before a job
// (pendingCmds.pending → readCmdFile): no pass of any plan ends, nothing
// in flight is observed, nothing held is released, no heartbeat. Ground
// truth: whether a pass of the running plan returned within 5 s, and the
// jobs the fake fleet was asked to create.
func TestReview37w_FifoCommandsFileHangsExecutor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as another local user")
	}
	e, fleet, clk := review37vTmpWorld(t, 3)
	dir := filepath.Dir(e.store)
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777))
	require.NoError(t, os.Remove(cmdFilePath(e.store)))
	review37wFifo(t, cmdFilePath(e.store))
	var err error
	ok := returnsWithin(t, cmdFilePath(e.store), 5*time.Second, func() {
		ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
		_, err = ex.Pass(e.ctx, "p1")
	})
	require.True(t, ok, "the executor's pass hangs: another user's FIFO at FILE.commands")
	assert.NoError(t, err)
	assert.NotEmpty(t, fleet.JobsCreated(), "no job of the running plan was created")
}

// TestReview37w_FifoWaitFileHangsExecutor: before every open of the
// store the executor opens FILE.wait to see whether a command waits
// (yieldToCommands: openSide, O_RDONLY, no O_NONBLOCK), and only then
// checks whose it is (cfbd9f1: another user's is ignored). Another local
// user's FIFO there blocks that open for ever: the executor never opens
// its store again (no pass, no power-off check, no heartbeat, nothing
// held released). Ground truth: whether one open of the store by the
// executor (the heartbeat's, any) returned within 5 s.
func TestReview37w_FifoWaitFileHangsExecutor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as another local user")
	}
	e := review37wTmpWorld(t)
	require.NoError(t, os.Remove(cmdFilePath(e.store)+".tmp"))
	review37wFifo(t, waitPath(e.store))
	var err error
	ok := returnsWithin(t, waitPath(e.store), 5*time.Second, func() {
		err = lockedStore{e}.with(func(*plan.BoltStore) error { return nil })
	})
	require.True(t, ok, "the executor's open of its store hangs: another user's FIFO at FILE.wait")
	assert.NoError(t, err)
}
