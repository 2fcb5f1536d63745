package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
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
	shareStore(t, e.store, svc, ops, 0o775)
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

// review37vTmpWorld is a running plan of n servers in a store of the
// service user (uid 65534, mode 0600) in a sticky world-writable
// directory (as /tmp, or a current directory others may write), in which
// another local user (uid 4545) made FILE.commands, its own file.
func review37vTmpWorld(t *testing.T, n int) (*env, *fake.Fleet, *fake.Clock) {
	t.Helper()
	const svc, mallory = 65534, 4545
	e, fleet, clk := review37sWorld(t, n)
	old := e.store
	dir := filepath.Join(filepath.Dir(old), "tmp")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777))
	e.store = filepath.Join(dir, "rebootctl.db")
	require.NoError(t, os.Rename(old, e.store))
	require.NoError(t, os.Chown(e.store, svc, svc))
	require.NoError(t, os.Chmod(e.store, 0o600))
	e.errw = &bytes.Buffer{}
	// Mallory's file: nothing in it, or anything.
	require.NoError(t, os.WriteFile(cmdFilePath(e.store), []byte(`{"id":"m","next":0,"records":[]}`), 0o644))
	require.NoError(t, os.Chown(cmdFilePath(e.store), mallory, mallory))
	return e, fleet, clk
}

// TestReview37v_ForeignSideFileLocksOutStop: round 19 refuses a
// FILE.commands made by a user who may not use the store (trustedSide),
// but refusing it is all it does: readSide returns the error, so every
// withCmdFile fails, and with it recordCommand. In a sticky world-writable
// directory, any local user may make FILE.commands before the first
// command does, and no one but its maker, the directory's owner or root
// may remove it; from then on `plan stop` fails for every operator, root
// (sudo) included, until someone removes the file by hand. The stop of a
// running plan is lost to a file a local user who may not read the store
// made. Ground truth: the plan's state read from the store itself.
func TestReview37v_ForeignSideFileLocksOutStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	e, _, _ := review37vTmpWorld(t, 3)
	ops := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}} // the operator (sudo)
	_, err := ops.operatorCommand("stop", "p1")
	assert.NoError(t, err, "the operator's stop, with another user's FILE.commands next to the store")
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "the plan's state in the store after the operator's stop") // the store itself, no side file applied
}

// TestReview37v_ForeignSideFileStallsExecutor: the same file keeps the
// executor from its store: every open (lockedStore.with → waitStoreNext →
// applyCommands → withCmdFile → readSide) fails, so no pass of any plan
// runs: nothing in flight is observed, nothing held is released, a
// frozen shard stays frozen, for as long as the file stays. Ground truth:
// the jobs the fake fleet was asked to create for a running plan.
func TestReview37v_ForeignSideFileStallsExecutor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	e, fleet, clk := review37vTmpWorld(t, 3)
	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err := ex.Pass(e.ctx, "p1")
	assert.NoError(t, err, "the executor's pass, with another user's FILE.commands next to the store")
	assert.NotEmpty(t, fleet.JobsCreated(), "no job of a running plan was created: another user's file stalls the executor")
}

// TestReview37v_ForeignLockFileHeldLocksOutStop: FILE.commands.lock is
// opened whoever made it (createSide opens an existing file as it is;
// only FILE.commands is checked for its owner), and every command waits
// for its lock (withCmdFile, at most cmdLockWait). In a sticky
// world-writable directory any local user may make it before the first
// command and hold a lock on it for ever (flock(1) ... sleep infinity on
// a file of its own, mode 0644): every operator's stop, root's included,
// then fails after 10 s, and none lands. Ground truth: the plan's state
// read from the store itself.
func TestReview37v_ForeignLockFileHeldLocksOutStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	const mallory = 4545
	e, _, _ := review37vTmpWorld(t, 3)
	require.NoError(t, os.Remove(cmdFilePath(e.store))) // no FILE.commands: only its lock
	lock := cmdFilePath(e.store) + ".lock"
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	require.NoError(t, os.Chown(lock, mallory, mallory))
	lf, err := os.Open(lock) // mallory's own open, read-only
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_SH))
	ops := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}} // the operator (sudo)
	_, err = ops.operatorCommand("stop", "p1")
	assert.NoError(t, err, "the operator's stop, with another user holding FILE.commands.lock")
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"), "the plan's state in the store after the operator's stop")
}

// TestReview37v_ServiceExecutorStallsOnRootCommand: the store is the
// service user's, shared with its operators' group (svc:ops 0660, svc not
// a member of ops), in a directory the group may write and others may
// enter (svc:ops 0775: dirClosed is false). An operator gives `sudo
// rebootctl plan stop p1`: as root it records the stop in FILE.commands
// (root may always make a usable side file), and is interrupted (Ctrl-C,
// a timeout) before it opens the store, or the executor opens the store
// first. The executor (svc) applies the stop, and must rewrite
// FILE.commands: createSide → sideFits refuses (svc is not in ops, so the
// file would be svc:nogroup and need bits for others, in a directory that
// lets others in), writeCmdFile fails, withCmdFile fails, and so does
// every open of the store by the executor from then on: no pass of any
// plan runs (another plan p2 starts nothing, nothing in flight is
// observed, a frozen shard stays frozen) until root gives another
// command. Ground truth: the jobs the fake fleet was asked to create for
// the running plan p2.
func TestReview37v_ServiceExecutorStallsOnRootCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	const svc, nogroup, ops = 65534, 65534, 4242
	// Two running plans: p1 of u000-u002, p2 of u003-u005.
	e, fleet, clk := twoPlanWorld(t, svc, ops)

	// sudo rebootctl plan stop p1, interrupted after it recorded the stop.
	_, err := recordCommand(e.ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)

	var perr error
	asUser(t, svc, nogroup, []int{}, func() {
		ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
		_, perr = ex.Pass(e.ctx, "p2")
	})
	assert.NoError(t, perr, "the service executor's pass of p2 after root recorded a stop of p1")
	assert.NotEmpty(t, fleet.JobsCreated(), "no job of the running plan p2 was created: the executor cannot open its store")
}

// TestReview37v_GroupOperatorLockedOutByRootCommand: the layout and the
// interrupted root stop of TestReview37v_ServiceExecutorStallsOnRootCommand;
// then an operator of the group stops p2. Its side file could not be made
// usable (sideFits: svc is not a member of ops, the directory lets others
// in), so the stop goes to the store directly (commandDirect); but its
// openStore applies FILE.commands first and must rewrite it, which it
// cannot either (createSide → sideFits): the stop fails, and so does every
// command of every operator of the group until root gives one. Ground
// truth: p2's state read from the store itself.
func TestReview37v_GroupOperatorLockedOutByRootCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the service user and the operator")
	}
	const svc, ops, op = 65534, 4242, 4343
	// Two running plans: p1 of u000-u002, p2 of u003-u005.
	e, _, _ := twoPlanWorld(t, svc, ops)

	// sudo rebootctl plan stop p1, interrupted after it recorded the stop.
	_, err := recordCommand(e.ctx, e.store, "p1", "stop", time.Now().UTC())
	require.NoError(t, err)

	asUser(t, op, op, []int{ops}, func() {
		ops := &env{ctx: e.ctx, store: e.store, errw: &bytes.Buffer{}}
		_, err = ops.operatorCommand("stop", "p2")
	})
	assert.NoError(t, err, "the group operator's stop of p2 after root recorded a stop of p1")
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p2"), "p2's state in the store after the group operator's stop")
}

// TestReview37v_ExecutorFleetFileFollowsSymlink: round 19 made the store
// never be opened through a symbolic link (plan.OpenBolt: O_NOFOLLOW, one
// link), and the side files never were (openSide); but the executor's
// state file next to the store, FILE.fleet (executor.go: --state
// defaults to the store's path + ".fleet", opened by inventory.OpenFleet
// → bolt.Open with no OpenFile), still follows one. The README's unit
// runs the executor as root in /var/lib/rebootctl; shared with an
// operators' group (the README's group layout: the directory writable by
// the group so that its members' commands can make FILE.commands), a
// member who is not root replaces FILE.fleet by a link to a path of its
// choice, and the executor's next start (Restart=always, a reboot of its
// own host by a plan) creates there, as root, a bbolt database: e.g. a
// file in /etc/sudoers.d that makes sudo refuse to run. Ground truth:
// the link's target after the executor opened its state file.
func TestReview37v_ExecutorFleetFileFollowsSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the executor and an operator of its group")
	}
	const ops, op = 4242, 4343
	e, _, _ := review37sWorld(t, 1)
	shareStore(t, e.store, 0, ops, 0o770|os.ModeSetgid)
	secret := filepath.Join(t.TempDir(), "sudoers.d")
	require.NoError(t, os.Mkdir(secret, 0o700)) // root's only
	target := filepath.Join(secret, "zz-rebootctl")
	state := e.store + ".fleet" // the executor's default --state
	asUser(t, op, op, []int{ops}, func() {
		require.NoError(t, os.Symlink(target, state))
	})
	inv := inventory.Inventory{Servers: []inventory.Server{{UUID: "00000000-0000-4000-8000-000000000000", Hostname: "cn0", Platform: "1",
		BMC: inventory.BMC{Redfish: "https://bmc-0", Username: "u", PasswordEnv: "P"}, Health: inventory.Health{TCP: "h:1"}}}}
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	f, err := inventory.OpenFleet(inv, state, inventory.Options{ // the executor, root
		Controller: func(context.Context, inventory.Server) (power.Controller, error) { return p, nil },
		Health:     func(context.Context, inventory.Server) error { return nil },
		BootID:     func() (string, error) { return "boot-1", nil },
		Self:       "none",
	})
	if err == nil {
		_ = f.Close()
	}
	t.Logf("the executor's open of its state file: %v", err)
	fi, serr := os.Lstat(target)
	if assert.ErrorIs(t, serr, os.ErrNotExist, "root's executor made a file where an operator's link pointed") {
		return
	}
	t.Logf("%s: %v, %d bytes, uid %d", target, fi.Mode(), fi.Size(), fi.Sys().(*syscall.Stat_t).Uid)
}
