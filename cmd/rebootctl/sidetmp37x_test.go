package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestSideFiles_TmpLeftoversOnlyOursRemoved: writeCmdFile writes through
// a temporary file of a random name and leaves none behind; a leftover of
// a crash made by this process's user (a random name, or an earlier
// version's fixed FILE.commands.tmp) is removed at the next write, and
// another user's is left alone (only its owner may judge it).
func TestSideFiles_TmpLeftoversOnlyOursRemoved(t *testing.T) {
	store := filepath.Join(t.TempDir(), "rebootctl.db")
	require.NoError(t, os.WriteFile(store, nil, 0o600))
	path := cmdFilePath(store)
	mine := []string{path + ".tmp", path + ".123456.tmp"}
	for _, p := range mine {
		require.NoError(t, os.WriteFile(p, []byte("crash"), 0o600))
	}
	other := path + ".999.tmp"
	require.NoError(t, os.WriteFile(other, []byte("another user's"), 0o644))
	unrelated := path + ".lock"
	require.NoError(t, os.WriteFile(unrelated, nil, 0o600))
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(other, 4545, 4545))
	}

	require.NoError(t, writeCmdFile(store, cmdFile{ID: "x", Next: 1, Records: []cmdRecord{{Seq: 1, Plan: "p1", Command: "stop"}}}))
	c, err := readCmdFile(store)
	require.NoError(t, err)
	require.Len(t, c.Records, 1)
	for _, p := range mine {
		assert.NoFileExists(t, p, "a leftover of this user's")
	}
	assert.FileExists(t, unrelated)
	if os.Geteuid() == 0 {
		assert.FileExists(t, other, "another user's file is never removed")
	}
	ents, err := os.ReadDir(filepath.Dir(store))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{"rebootctl.db", "rebootctl.db.commands", "rebootctl.db.commands.lock"}
	if os.Geteuid() == 0 {
		want = append(want[:2], "rebootctl.db.commands.999.tmp", want[2])
	}
	assert.Equal(t, want, names, "the files next to the store after a write")
}

// TestSideFiles_OpenSideRefusesFifoAtOnce: every side-file open (openSide)
// returns at once on a FIFO, whatever the flag (an open for reading
// without O_NONBLOCK blocks until a writer comes), and refuses it with
// the operator's message: what it is, and the fix (rm PATH).
func TestSideFiles_OpenSideRefusesFifoAtOnce(t *testing.T) {
	store := filepath.Join(t.TempDir(), "rebootctl.db")
	require.NoError(t, os.WriteFile(store, nil, 0o600))
	for _, path := range []string{cmdFilePath(store), cmdFilePath(store) + ".lock", waitPath(store)} {
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_CREATE} {
			var err error
			ok := returnsWithin(t, path, 5*time.Second, func() {
				var f *os.File
				if f, err = openSide(path, flag); err == nil {
					f.Close()
				}
			})
			require.True(t, ok, "openSide(%s, %#o) blocks on a FIFO", path, flag)
			require.ErrorIs(t, err, errNotSideFile)
			assert.Contains(t, err.Error(), "a FIFO")
			assert.Contains(t, err.Error(), "rm "+path)
		}
		_, err := readSide(store, path)
		require.ErrorIs(t, err, errNotSideFile)
	}
}

// TestSideFiles_OnceRecordedFullCommands: with the plan's Commands full
// (plan.MaxCommands), a command recorded before the oldest of them is
// never applied again (it would undo the later ones); one recorded after
// it is applied.
func TestSideFiles_OnceRecordedFullCommands(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	p := plan.Plan{State: plan.StateStopped}
	for i := range plan.MaxCommands {
		p.Commands = append(p.Commands, plan.Mark{At: t0.Add(time.Duration(i+1) * time.Minute), Command: "stop"})
	}
	_, err := onceRecorded("run", t0, plan.Run)(p)
	require.ErrorIs(t, err, errRecordedAlready, "a run recorded before the 100 commands the plan keeps")
	q, err := onceRecorded("run", t0.Add(time.Hour+time.Second), plan.Run)(p)
	require.NoError(t, err)
	assert.Equal(t, plan.StateRunning, q.State)
	assert.Len(t, q.Commands, plan.MaxCommands)
}
