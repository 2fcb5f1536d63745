//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview37t_GroupOperatorStopHaltsServiceExecutor: the store is shared
// through a group (svc:ops, mode 0660, its directory svc:ops 0770, not
// setgid); an operator of group ops (not root) gives `plan stop`. The side
// files it makes get the store's mode (likeStore) but keep the operator's
// own uid and primary group: FILE.commands.lock and FILE.commands become
// op:op 0660, which the service user (the executor's, who owns the store)
// may not open. From then on every open of the store by the executor
// fails, for good, until someone chowns the files. likeStore could give
// them the store's group (a member may chgrp). Ground truth: rebootctl run
// with the service user's uid (plan show opens the store as the executor
// does), after the stop.
func TestReview37t_GroupOperatorStopHaltsServiceExecutor(t *testing.T) {
	const svc, nogroup, ops, op = 65534, 65534, 4242, 4343
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	e, _, _ := review37sWorld(t, 3)
	dir := filepath.Dir(e.store)
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, svc, ops))
	require.NoError(t, os.Chmod(dir, 0o770))
	require.NoError(t, os.Chown(e.store, svc, ops))
	require.NoError(t, os.Chmod(e.store, 0o660))
	bin := filepath.Join(filepath.Dir(dir), "rebootctl")
	b, err := os.ReadFile(binary)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	as := func(cred *syscall.Credential, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "REBOOTCTL_STORE="+e.store, "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd.CombinedOutput()
	}
	service := &syscall.Credential{Uid: svc, Gid: nogroup, Groups: []uint32{}}
	operator := &syscall.Credential{Uid: op, Gid: op, Groups: []uint32{ops}}
	out, err := as(service, "plan", "show", "p1")
	require.NoError(t, err, "the service user reads its store before the stop:\n%s", out)
	out, err = as(operator, "plan", "stop", "p1")
	require.NoError(t, err, "the operator of group ops stops p1:\n%s", out)
	out, err = as(service, "plan", "show", "p1")
	assert.NoError(t, err, "the service user (uid %d) opens its store after a stop given by an operator of the store's group:\n%s", svc, out)
}
