package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestExecutor_StopReleasesLease: an executor that stops (its context
// ended) gives up its lease once its fleet is closed: the next executor
// on the store starts at once (before, one started in the same process,
// or on another machine, was refused as "another executor runs" until
// the lease lapsed, 25 s). The lease stays in the store, lapsed, naming
// the fleet state file the stopped executor used. Ground truth: the
// lease read from the store itself.
func TestExecutor_StopReleasesLease(t *testing.T) {
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	require.NoError(t, os.WriteFile(invPath, []byte("defaults:\n  bmc: {username: admin, password_env: X37_PW, redfish: \"https://127.0.0.1:1\"}\n"+
		"servers:\n  - {uuid: 00000001-0000-4000-8000-000000000000, hostname: s1, platform: \"1\", bmc: {system: s1}, health: {tcp: \"127.0.0.1:1\"}}\n"), 0o600))
	t.Setenv("X37_PW", "pw")
	store := filepath.Join(t.TempDir(), "rebootctl.db")
	ctl := func(timeout time.Duration, args ...string) (int, string) {
		var errw bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		code := run(ctx, append(args, "--store", store, "--inventory", invPath), io.Discard, &errw)
		return code, errw.String()
	}
	code, msg := ctl(5*time.Second, "plan", "create", "--all", "--target", "2", "--uuid", "p1")
	require.Equal(t, exitOK, code, msg)
	for i := range 2 {
		code, msg = ctl(500*time.Millisecond, "executor", "--self", "none")
		require.Equal(t, exitOK, code, "executor %d: %s", i+1, msg)
		assert.NotContains(t, msg, "another executor runs")
	}
	bs, err := plan.OpenBolt(store)
	require.NoError(t, err)
	raw, err := bs.GetMeta(t.Context(), metaLease)
	require.NoError(t, bs.Close())
	require.NoError(t, err)
	var l lease
	require.NoError(t, json.Unmarshal(raw, &l))
	host, _ := os.Hostname()
	assert.True(t, l.free(host, pidNamespace()), "the stopped executor's lease: %s", l)
	assert.Equal(t, canonicalPath(store+".fleet"), l.State)
}
