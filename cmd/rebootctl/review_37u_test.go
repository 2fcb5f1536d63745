package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// stopThenPowerOffCheck is the fake fleet; while the executor's first
// CreateJob call is with the BMC, the operator gives `plan stop` (its own
// rebootctl applies it), and then a job of the same plan that runs in the
// executor's process (created by an earlier pass) reaches its first
// power-off: the fleet asks PlanCheck, which reads the plan's view through
// the executor's own store (executor.go: store.GetView(ctx, planUUID)).
type stopThenPowerOffCheck struct {
	*fake.Fleet
	e, ops    *env
	t         *testing.T
	calls     atomic.Int32
	afterStop []string
	stopped   atomic.Bool
	checkView plan.View
}

func (f *stopThenPowerOffCheck) CreateJob(ctx context.Context, a plan.Action) error {
	if f.stopped.Load() {
		f.afterStop = append(f.afterStop, a.JobUUID)
	}
	err := f.Fleet.CreateJob(ctx, a)
	if f.calls.Add(1) == 1 {
		v, serr := f.ops.operatorCommand("stop", "p1")
		require.NoError(f.t, serr)
		require.Equal(f.t, plan.StateStopped, v.State)
		f.stopped.Store(true)
		// PlanCheck of another job of p1, in the executor's process.
		f.checkView, serr = lockedStore{f.e}.GetView(ctx, "p1")
		require.NoError(f.t, serr)
	}
	return err
}

// TestReview37u_PowerOffCheckHidesStopFromPass: CommandPending is false
// for a command recorded before the executor's last read of the plan
// through lockedStore.read (pendingCmds.saw), whatever that read was for.
// The executor's PlanCheck (run by the fleet's job workers, concurrently
// with the pass, before every first power-off) reads the plan through the
// same lockedStore.GetView: it marks the plan seen at a mark past the
// operator's stop, although the pass running at that moment decided on an
// older read and never looks at what PlanCheck read. CommandPending then
// says false and the pass goes on creating jobs until its next 16-job
// recheck: 15 jobs after the operator was told "stopped". A stop does not
// end a plan (State.Finished is false), so PlanCheck lets these jobs power
// their servers off (jobLive: job step, plan not finished): 15 reboots
// started after a stop landed. README: "no reboot starts after a stop or
// cancel has landed (but the job being created as it landed)". Ground
// truth: the jobs the fake fleet was asked to create after the stop
// command returned.
func TestReview37u_PowerOffCheckHidesStopFromPass(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 20)
	ops := &env{ctx: e.ctx, store: e.store} // the operator's own process
	f := &stopThenPowerOffCheck{Fleet: fleet, e: e, ops: ops, t: t}
	ex := &plan.Executor{Fleet: f, Store: lockedStore{e}, Now: clk.Now}
	_, _ = ex.Pass(e.ctx, "p1")
	require.True(t, f.stopped.Load(), "the stop was given")
	if assert.Empty(t, f.afterStop, "jobs created after the operator's stop returned \"stopped\" (%d jobs in all)", f.calls.Load()) {
		return
	}
	// What those jobs' own power-off check says: go ahead.
	live, why := jobLive(f.checkView, f.afterStop[0], true)
	t.Logf("PlanCheck of job %s created after the stop: live=%v (%s)", f.afterStop[0], live, why)
}

// TestReview37u_ForeignSideFileStartsPlan: the side files are trusted
// whoever owns them: readSide checks that FILE.commands is a regular file
// with one link, never whose it is. A store kept in a directory others
// may write (a sticky, world-writable one such as /tmp: the default store
// is rebootctl.db in the current directory) is out of their reach (its
// owner's, mode 0600), but its FILE.commands does not exist until the
// first command: any local user may create it, and the executor (root in
// the README's unit) applies what it holds. A plan created and not run
// yet (waiting for its review) is started by a user who may not read the
// store. Ground truth: the jobs the fake fleet was asked to create.
func TestReview37u_ForeignSideFileStartsPlan(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the store's owner and another local user")
	}
	const svc, mallory = 65534, 4545
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", quickServers(3, "%03d")...)
	p := newPlan37(t, fleet.Servers(), "p1", plan.Count(3), clk.Now(), false)
	dir := filepath.Join(t.TempDir(), "tmp")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, os.ModeSticky|0o777)) // as /tmp
	path := filepath.Join(dir, "rebootctl.db")
	createStore(t, ctx, path, p) // plan create: created, not run
	require.NoError(t, os.Chown(path, svc, svc))
	require.NoError(t, os.Chmod(path, 0o600))
	e := &env{ctx: ctx, store: path}

	// Another local user plants FILE.commands (its own file, one link).
	forged := fmt.Sprintf(`{"id":"m","next":1,"records":[{"seq":1,"plan":"p1","command":"run","at":%q}]}`,
		time.Now().UTC().Format(time.RFC3339Nano))
	require.NoError(t, os.WriteFile(cmdFilePath(path), []byte(forged), 0o644))
	require.NoError(t, os.Chown(cmdFilePath(path), mallory, mallory))

	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, _ = ex.Pass(ctx, "p1")
	assert.Empty(t, fleet.JobsCreated(), "jobs created for a plan no operator ran: a run planted in FILE.commands by uid %d was applied", mallory)
	st, err := e.openStore()
	if err == nil {
		h, herr := st.GetHead(ctx, "p1")
		require.NoError(t, st.Close())
		require.NoError(t, herr)
		assert.Equal(t, plan.StateCreated, h.State, "plan state after a run planted by another user")
	}
}

// stopAfterSave is the executor's store; the operator's stop lands right
// after the pass saved its decisions (its PutView), before its actions.
type stopAfterSave struct {
	lockedStore
	t     *testing.T
	ops   *env
	saved int
}

func (s *stopAfterSave) PutView(ctx context.Context, v plan.View) error {
	err := s.lockedStore.PutView(ctx, v)
	if s.saved++; s.saved == 1 && err == nil {
		_, serr := s.ops.operatorCommand("stop", "p1")
		require.NoError(s.t, serr)
	}
	return err
}

// freezeCount is the fake fleet, counting the freezes asked for.
type freezeCount struct {
	*fake.Fleet
	freezes int
}

func (f *freezeCount) FreezeShard(ctx context.Context) error {
	f.freezes++
	return f.Fleet.FreezeShard(ctx)
}

// TestReview37u_ShardFrozenAfterStopLanded: the pass looks for a command
// (CommandPending, or its 16-job read of the state) before a job only,
// not before the freeze of the database shard that the shard primary's
// reboot starts with: a stop that landed after the pass saved, and before
// its actions, is followed by a freeze of the shard for a reboot that
// can no longer start (the next pass unfreezes it, an interval later).
// Issue 37 point 7: "never freeze before the job can start"; README: "no
// reboot starts after a stop or cancel has landed". Ground truth: the
// fake fleet's freezes asked for.
func TestReview37u_ShardFrozenAfterStopLanded(t *testing.T) {
	e, fake0, clk := storeWorld(t, quickServers(3, "%03d"), plan.Count(3), "u000")
	ctx, path := e.ctx, e.store
	fleet := &freezeCount{Fleet: fake0}
	st := &stopAfterSave{lockedStore: lockedStore{e}, t: t, ops: &env{ctx: ctx, store: path}}
	ex := &plan.Executor{Fleet: fleet, Store: st, Now: clk.Now}
	_, _ = ex.Pass(ctx, "p1")
	require.Equal(t, 1, st.saved, "the pass saved once, and the stop landed then")
	frozen, _ := fleet.Frozen()
	assert.Zero(t, fleet.freezes, "the shard was frozen after the stop landed (frozen now: %v)", frozen)
	clk.Advance(5 * time.Second) // the executor's interval
	_, _ = (&plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}).Pass(ctx, "p1")
	frozen, _ = fleet.Frozen()
	t.Logf("after the next pass: frozen %v", frozen)
}

// TestReview37u_SudoCommandFollowsStoreSymlink: the side files are never
// opened through a symbolic link (round 18), but the store itself is:
// plan.OpenBolt (bolt.Open, O_RDWR|O_CREATE) follows FILE when it is a
// symbolic link, and the store's owner (the executor's service user, who
// owns the store's directory) may make it one. An operator's `sudo
// rebootctl plan stop` then opens, locks and, when the target is empty,
// writes a bolt database into any file root can write (here an empty
// root-only file elsewhere: it grows to a bolt file of several pages).
// Ground truth: the target's size after the command.
func TestReview37u_SudoCommandFollowsStoreSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as the operator's sudo")
	}
	e, _, _ := review37sWorld(t, 3)
	dir := filepath.Dir(e.store)
	require.NoError(t, os.Chown(dir, 65534, 65534))
	// The service user replaces its store by a link to a root file.
	secret := filepath.Join(t.TempDir(), "root-only")
	require.NoError(t, os.WriteFile(secret, nil, 0o600))
	require.NoError(t, os.Remove(e.store))
	require.NoError(t, os.Symlink(secret, e.store))
	_, err := e.operatorCommand("stop", "p1")
	t.Logf("the operator's stop: %v", err)
	fi, serr := os.Stat(secret)
	require.NoError(t, serr)
	assert.Zero(t, fi.Size(), "root's file was written through the store's symbolic link (%d bytes now)", fi.Size())
}
