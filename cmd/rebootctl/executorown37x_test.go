package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestExecutor_StoreJudgedByDescriptor: the executor's every open of the
// plan store judges the file it opened (executorOwnsFile, through
// plan.BoltOptions.Check), not the path looked at before: a store another
// user made in a sticky world-writable directory after the executor's
// first look is refused by the open itself, before bbolt reads or writes
// a byte of it; the executor's own store there opens. Ground truth: the
// file's bytes (bbolt writes its meta pages at the first open).
func TestExecutor_StoreJudgedByDescriptor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make another local user's file")
	}
	const mallory = 4545
	dir := filepath.Join(t.TempDir(), "tmp")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777))
	store := filepath.Join(dir, "rebootctl.db")
	e := &env{ctx: context.Background(), store: store, errw: &bytes.Buffer{}, creating: true, checkStore: executorOwnsFile("the plan store")}

	require.NoError(t, os.WriteFile(store, nil, 0o666))
	require.NoError(t, os.Chown(store, mallory, mallory))
	_, err := e.waitStore()
	require.ErrorIs(t, err, errForeignExecutorFile)
	assert.Contains(t, err.Error(), "the plan store "+store)
	fi, err := os.Stat(store)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "bbolt wrote into another user's file before the check")

	require.NoError(t, os.Chown(store, 0, 0))
	s, err := e.waitStore()
	require.NoError(t, err, "the executor's own store")
	require.NoError(t, s.Close())
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	require.NoError(t, bs.Close())
}
