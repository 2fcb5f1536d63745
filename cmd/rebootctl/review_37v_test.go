package main

import (
	"bytes"
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

// asUser runs f with this process's effective uid, gid and groups those
// of a local user (every thread: syscall.Seteuid is all-threads), and
// root's again after.
func asUser(t *testing.T, uid, gid int, groups []int, f func()) {
	t.Helper()
	require.NoError(t, syscall.Setgroups(groups))
	require.NoError(t, syscall.Setegid(gid))
	require.NoError(t, syscall.Seteuid(uid))
	defer func() {
		require.NoError(t, syscall.Seteuid(0))
		require.NoError(t, syscall.Setegid(0))
		require.NoError(t, syscall.Setgroups(nil))
	}()
	f()
}

// directStopDuringPass is the fake fleet: while the executor's first
// CreateJob call is with the fleet, a member of the store's group gives
// `plan stop` (operatorCommand, as that user); its side file could not be
// made usable (sideFits), so the stop is applied to the store directly
// (commandDirect).
type directStopDuringPass struct {
	*fake.Fleet
	t         *testing.T
	ops       *env
	calls     atomic.Int32
	stopped   atomic.Bool
	afterStop []string
	state     plan.State
}

func (f *directStopDuringPass) CreateJob(ctx context.Context, a plan.Action) error {
	if f.stopped.Load() {
		f.afterStop = append(f.afterStop, a.JobUUID)
	}
	err := f.Fleet.CreateJob(ctx, a)
	if f.calls.Add(1) == 1 {
		asUser(f.t, 4343, 4343, []int{4242}, func() {
			v, serr := f.ops.operatorCommand("stop", "p1")
			require.NoError(f.t, serr)
			f.state = v.State
		})
		f.stopped.Store(true)
	}
	return err
}

// TestReview37v_DirectStopFollowedBy15Jobs: round 19 made an operator
// whose side file would be unusable by the store's other users (sideFits:
// the store's owner is not a member of the store's group, and the
// store's directory lets others in, as a 0775 /var/lib/rebootctl does)
// apply the stop to the store directly (operatorCommand → commandDirect).
// Such a command is never in FILE.commands, and the rebootctl executor's
// CommandPending (lockedStore → pendingCmds.pending) looks only there: it
// says "nothing pending" before every job, and the pass goes on creating
// jobs until its 16-job read of the state, 15 jobs after the operator was
// told "stopped". plan/doc.go: "on a CommandStore, such as rebootctl's
// store, ... it looks before every job: none but the one in flight".
// Ground truth: the jobs the fake fleet was asked to create after the
// stop command returned.
func TestReview37v_DirectStopFollowedBy15Jobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the service user and an operator of its group")
	}
	const svc, ops = 65534, 4242
	e, fleet, clk := review37sWorld(t, 20)
	e.errw = &bytes.Buffer{}
	dir := filepath.Dir(e.store)
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, svc, ops))
	require.NoError(t, os.Chmod(dir, 0o775))
	require.NoError(t, os.Chown(e.store, svc, ops))
	require.NoError(t, os.Chmod(e.store, 0o660))
	var msg bytes.Buffer
	opsEnv := &env{ctx: e.ctx, store: e.store, errw: &msg} // the operator's own process
	f := &directStopDuringPass{Fleet: fleet, t: t, ops: opsEnv}
	ex := &plan.Executor{Fleet: f, Store: lockedStore{e}, Now: clk.Now}
	_, _ = ex.Pass(e.ctx, "p1")
	require.True(t, f.stopped.Load(), "the stop was given")
	require.Equal(t, plan.StateStopped, f.state, "the operator was told the plan stopped")
	require.Contains(t, msg.String(), "applied to the store directly", "the stop took the direct path (commandDirect)")
	assert.Empty(t, f.afterStop, "jobs created after the operator's direct stop returned \"stopped\" (%d CreateJob calls in all)", f.calls.Load())
}
