package main

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// stopDuringJob is the fake fleet, and an operator who gives `plan stop`
// while the executor's first CreateJob call is with the BMC (it takes its
// time there, as a real Redfish call does).
type stopDuringJob struct {
	*fake.Fleet
	e         *env
	t         *testing.T
	calls     atomic.Int32
	afterStop atomic.Int32
	stopped   atomic.Bool
}

func (f *stopDuringJob) CreateJob(ctx context.Context, a plan.Action) error {
	if f.stopped.Load() {
		f.afterStop.Add(1)
	}
	err := f.Fleet.CreateJob(ctx, a)
	if f.calls.Add(1) == 1 {
		// The operator's rebootctl: records the stop in FILE.commands,
		// opens the store (the executor holds it for its reads and writes
		// only, not during a fleet call), which applies it, and reports
		// "stopped" to the operator.
		v, serr := f.e.operatorCommand("stop", "p1")
		require.NoError(f.t, serr)
		require.Equal(f.t, plan.StateStopped, v.State)
		f.stopped.Store(true)
	}
	return err
}

// TestReview37t_StopAppliedByOperatorNotSeenByExecutor: the operator's
// own rebootctl applies its stop (it opens the store right after
// recording it, and the executor does not hold the store during a fleet
// call), so by the time the executor asks CommandPending before its next
// job the record is marked applied and CommandPending says false: the
// executor goes on creating jobs until its next 16-job recheck, 15 jobs
// after a stop the operator was told has landed. README: "no reboot
// starts after a stop or cancel has landed (but the job being created as
// it landed)". Ground truth: the jobs the fake fleet was asked to create
// after the stop command returned.
func TestReview37t_StopAppliedByOperatorNotSeenByExecutor(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 20)
	ops := &env{ctx: e.ctx, store: e.store} // the operator's own process
	f := &stopDuringJob{Fleet: fleet, e: ops, t: t}
	ex := &plan.Executor{Fleet: f, Store: lockedStore{e}, Now: clk.Now}
	_, _ = ex.Pass(e.ctx, "p1")
	require.True(t, f.stopped.Load(), "the stop was given")
	assert.Zero(t, f.afterStop.Load(), "jobs created after the operator's stop returned \"stopped\" (%d jobs in all)", f.calls.Load())
}

// TestReview37t_SudoStopFollowsLockSymlink: a command given with sudo opens
// FILE.commands.lock (and FILE.wait) with O_CREATE and no O_NOFOLLOW, then
// fchowns and fchmods what it opened to the store file's owner
// (likeStore). The store's owner (the executor's service user, who owns
// the directory of its store) can make FILE.commands.lock a symlink to any
// file: the operator's `sudo rebootctl plan stop` then gives that file
// (/etc/shadow, /etc/sudoers) to the service user: a root escalation.
// Ground truth: the target's stat after the command.
func TestReview37t_SudoStopFollowsLockSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the operator's sudo")
	}
	const uid, gid = 65534, 65534
	e, _, _ := review37sWorld(t, 3)
	require.NoError(t, os.Chown(e.store, uid, gid))
	require.NoError(t, os.Chmod(e.store, 0o660))
	// A root-only file elsewhere (stands for /etc/shadow).
	secret := filepath.Join(t.TempDir(), "shadow")
	require.NoError(t, os.WriteFile(secret, []byte("root:x\n"), 0o600))
	require.NoError(t, os.Symlink(secret, cmdFilePath(e.store)+".lock"))
	_, _ = e.operatorCommand("stop", "p1")
	fi, err := os.Stat(secret)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "root's file was given to the store's owner through the lock symlink")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "root's file got the store's mode through the lock symlink")
}
