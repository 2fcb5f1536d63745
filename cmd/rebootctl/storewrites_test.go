package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreWrites_SameTickWriteSeen: a write by another process within the
// same clock tick as the executor's last (the file's size, inode and the
// kernel's coarse modification time all as the executor's write left
// them) is still seen: the executor gave the file a time of its own
// (1 ns later), which no write stamps. Reads change nothing; a plan read
// after the write is no longer behind it.
func TestStoreWrites_SameTickWriteSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.db")
	require.NoError(t, os.WriteFile(path, []byte("v1"), 0o600))
	var w storeWrites
	w.saw("p1", w.opened(path))
	w.closing(path) // the executor's pass read p1
	assert.False(t, w.since(path, "p1"), "nothing written since the pass's read")
	w.opened(path)
	w.closing(path) // another read of the executor's
	assert.False(t, w.since(path, "p1"), "the executor's own reads")

	// The executor's own write at kernel time T.
	epoch := w.opened(path)
	require.NoError(t, os.WriteFile(path, []byte("v2"), 0o600))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	tick := fi.ModTime()
	w.closing(path)
	w.saw("p1", epoch)
	assert.False(t, w.since(path, "p1"), "the executor's own write")
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.NotEqual(t, tick, fi.ModTime(), "the executor's mark")

	// Another process's write in the same tick: same size, same inode,
	// and the kernel stamps T again.
	require.NoError(t, os.WriteFile(path, []byte("v3"), 0o600))
	require.NoError(t, os.Chtimes(path, time.Time{}, tick))
	assert.True(t, w.since(path, "p1"), "another process's write in the executor's clock tick")
	assert.True(t, w.since(path, "p2"), "for every plan")

	// An open by the executor for something else (the heartbeat) finds
	// it: the pass's plans are still behind it until read.
	w.opened(path)
	w.closing(path)
	assert.True(t, w.since(path, "p1"), "found by another open of the executor's, not read by the pass yet")
	w.saw("p1", w.opened(path))
	w.closing(path)
	assert.False(t, w.since(path, "p1"), "the pass read p1 after the write")
	assert.True(t, w.since(path, "p2"), "p2 not read since")
}

// TestStoreWait_ForeignWaitFileNotYieldedTo: a FILE.wait made by a user
// who may not use the store, and held locked by it for ever (a sticky
// world-writable directory), is not a command waiting: the executor does
// not wait maxYield before each of its opens of the store (as it does for
// a wait file of the store's users). Ground truth: how long
// yieldToCommands waited, against maxYield, which it waits in full when
// it yields.
func TestStoreWait_ForeignWaitFileNotYieldedTo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	const mallory = 4545
	e, _, _ := review37vTmpWorld(t, 3)
	w := waitPath(e.store)
	require.NoError(t, os.WriteFile(w, nil, 0o644))
	require.NoError(t, os.Chown(w, mallory, mallory))
	f, err := os.Open(w)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	start := time.Now()
	yieldToCommands(e.ctx, e.store)
	assert.Less(t, time.Since(start), maxYield, "the executor waited for another user's FILE.wait")
}
