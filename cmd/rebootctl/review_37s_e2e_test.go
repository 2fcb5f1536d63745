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

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37s_SudoStopHaltsServiceExecutor: the executor runs as a
// service user that owns the store (a systemd unit with User=); an
// operator stops a plan with sudo (as root, who may open the 0600 store,
// as before this change). The stop creates FILE.commands and
// FILE.commands.lock owned by root, mode 0600 (cmdfile.go withCmdFile,
// writeCmdFile); from then on every open of the store by the service user
// fails (permission denied on the lock file), for good: the executor's
// every read and write (env.waitStore, lockedStore), so no pass of any
// plan and no PlanCheck before a power-off, and every command the service
// user gives, until someone changes the files' owner. FILE.wait, made the
// same way, is no error (storewait.go). Ground truth: rebootctl run with
// the service user's uid (plan show, which opens the store as the
// executor does), before and after the stop.
func TestReview37s_SudoStopHaltsServiceExecutor(t *testing.T) {
	const uid, gid = 65534, 65534
	if os.Getuid() != 0 {
		t.Skip("needs root, to act as the operator's sudo and as the service user")
	}
	e, _, _ := review37sWorld(t, 3)
	dir := filepath.Dir(e.store)
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, uid, gid))
	require.NoError(t, os.Chown(e.store, uid, gid))
	bin := filepath.Join(filepath.Dir(dir), "rebootctl")
	b, err := os.ReadFile(binary)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	asService := func() ([]byte, error) {
		cmd := exec.Command(bin, "plan", "show", "p1")
		cmd.Env = append(os.Environ(), "REBOOTCTL_STORE="+e.store, "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		return cmd.CombinedOutput()
	}
	out, err := asService()
	require.NoError(t, err, "the service user reads its store before the stop:\n%s", out)
	// The operator's `sudo rebootctl plan stop p1`.
	v, err := e.operatorCommand("stop", "p1")
	require.NoError(t, err)
	require.Equal(t, plan.StateStopped, v.State)
	out, err = asService()
	assert.NoError(t, err, "the service user (uid %d) opens its store after a stop given with sudo:\n%s", uid, out)
}
