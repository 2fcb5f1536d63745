package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSideFiles_TmpScanOncePerProcess: writeCmdFile reads the store's
// directory for its user's crash leftovers at this process's first
// write of the side file only (a crash ends a process: the next one
// finds them), not at every write: the executor writes the file at every
// command it applies, with its lock held, and the directory may be a
// /tmp anyone can fill with files. A leftover planted after the first
// write is left by later writes (the directory is not read again), and
// is removed by a new process's first write (the set forgotten here).
// Before, every write read the whole directory (100,000 files: about
// 120 ms per write).
func TestSideFiles_TmpScanOncePerProcess(t *testing.T) {
	store := filepath.Join(t.TempDir(), "rebootctl.db")
	require.NoError(t, os.WriteFile(store, nil, 0o600))
	path := cmdFilePath(store)
	c := cmdFile{ID: "x", Next: 1, Records: []cmdRecord{{Seq: 1, Plan: "p1", Command: "stop"}}}
	require.NoError(t, writeCmdFile(store, c))
	left := path + ".777777.tmp"
	require.NoError(t, os.WriteFile(left, []byte("crash"), 0o600))
	for range 3 {
		require.NoError(t, writeCmdFile(store, c))
	}
	assert.FileExists(t, left, "a later write of this process read the directory again")

	tmpScans.again(path) // what a new process starts with
	require.NoError(t, writeCmdFile(store, c))
	assert.NoFileExists(t, left, "a new process's first write removes this user's leftovers")
}

// BenchmarkWriteCmdFileCrowdedDir: one write of the side file in a
// directory holding 100,000 other files (a /tmp anyone can fill).
func BenchmarkWriteCmdFileCrowdedDir(b *testing.B) {
	dir := b.TempDir()
	store := filepath.Join(dir, "rebootctl.db")
	require.NoError(b, os.WriteFile(store, nil, 0o600))
	for i := range 100_000 {
		require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("junk%06d", i)), nil, 0o600))
	}
	c := cmdFile{ID: "x", Next: 1, Records: []cmdRecord{{Seq: 1, Plan: "p1", Command: "stop"}}}
	require.NoError(b, writeCmdFile(store, c)) // the process's first write reads the directory
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, writeCmdFile(store, c))
	}
}
