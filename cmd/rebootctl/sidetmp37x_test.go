package main

import (
	"bytes"
	"context"
	"io"
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

// TestExecutor_RefusesForeignFilesInOpenDir: in a sticky world-writable
// directory any local user may make FILE.fleet (or the store) before the
// executor's first start; ownfile.Opener takes any owner's file, so the
// executor would keep its power bookkeeping in a file that user may
// rewrite. The executor refuses another user's store or fleet state file
// there (the message names it and the fix), before it writes anything
// (its lease is not claimed); in a directory others may not write,
// another user's file is used (its writer was trusted with the
// directory). Ground truth: the fleet file's bytes and the store's
// lease read from the store itself.
func TestExecutor_RefusesForeignFilesInOpenDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make another local user's file")
	}
	const mallory = 4545
	dir := filepath.Join(t.TempDir(), "tmp")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777))
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	require.NoError(t, os.WriteFile(invPath, []byte("defaults:\n  bmc: {username: admin, password_env: X37_PW, redfish: \"https://127.0.0.1:1\"}\n"+
		"servers:\n  - {uuid: 00000001-0000-4000-8000-000000000000, hostname: s1, platform: \"1\", bmc: {system: s1}, health: {tcp: \"127.0.0.1:1\"}}\n"), 0o600))
	t.Setenv("X37_PW", "pw")
	store := filepath.Join(dir, "rebootctl.db")
	ctl := func(args ...string) (int, string) {
		var errw bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // an executor that does not refuse runs until then
		defer cancel()
		code := run(ctx, append(args, "--store", store, "--inventory", invPath), io.Discard, &errw)
		return code, errw.String()
	}
	code, msg := ctl("plan", "create", "--all", "--target", "2", "--uuid", "p1")
	require.Equal(t, exitOK, code, msg)
	leased := func() bool {
		bs, err := plan.OpenBolt(store)
		require.NoError(t, err)
		defer bs.Close()
		raw, err := bs.GetMeta(t.Context(), metaLease)
		require.NoError(t, err)
		return len(raw) > 0
	}

	// Mallory's FILE.fleet, made before the executor's first start.
	fleet := store + ".fleet"
	require.NoError(t, os.WriteFile(fleet, nil, 0o666))
	require.NoError(t, os.Chown(fleet, mallory, mallory))
	code, msg = ctl("executor", "--self", "none")
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "the fleet state file "+fleet)
	assert.Contains(t, msg, "rm "+fleet)
	fi, err := os.Stat(fleet)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "the executor wrote in another user's fleet state file")
	assert.False(t, leased(), "the executor claimed the store before refusing")
	require.NoError(t, os.Remove(fleet))

	// Mallory's store (the executor's user is root here).
	require.NoError(t, os.Chown(store, mallory, mallory))
	code, msg = ctl("executor", "--self", "none")
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "the plan store "+store)
	require.NoError(t, os.Chown(store, 0, 0))
	assert.False(t, leased(), "the executor claimed another user's store")
	assert.NoFileExists(t, fleet)

	// The same files in a directory others may not write: used.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.WriteFile(fleet, nil, 0o666))
	require.NoError(t, os.Chown(fleet, mallory, mallory))
	assert.NoError(t, executorOwns(fleet, "the fleet state file"))
	require.NoError(t, os.Chown(store, mallory, mallory))
	assert.NoError(t, executorOwns(store, "the plan store"))
}
