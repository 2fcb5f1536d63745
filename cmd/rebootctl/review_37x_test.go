package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37x_ClockStepBackLosesStop: round 21's onceRecorded takes a
// side-file command recorded before the oldest of a full plan.Commands
// as applied already (errRecordedAlready, nothing written), comparing
// wall-clock times. A clock that was ahead and is stepped back (NTP
// fixing a wrong RTC, a VM restored, or two hosts sharing the store
// over NFS with skewed clocks) makes every new command "older" than
// the plan's last 100 commands: the operator's `plan stop p1` is
// recorded, marked applied with no error, and the operator is told
// "stopped; no new reboot starts", while p1 keeps running and starting
// reboots. Before round 21 the same stop landed (only an exact
// (command, at) match was skipped). Ground truth: p1's state read from
// the store itself, and the executor's next pass starting jobs.
func TestReview37x_ClockStepBackLosesStop(t *testing.T) {
	e, fleet, clk := review37sWorld(t, 3)
	// 100 commands given while the host's clock was one hour ahead (a
	// nightly pause and resume, a script, several operators), ending
	// with a run: p1 runs.
	ahead := time.Now().UTC().Add(time.Hour)
	bs, err := plan.OpenBolt(e.store)
	require.NoError(t, err)
	for i := range plan.MaxCommands {
		name := []string{"stop", "run"}[i%2]
		_, err := plan.Command(e.ctx, bs, "p1", plan.Record(name, ahead.Add(time.Duration(i)*time.Second), cmdFuncs[name]))
		require.NoError(t, err)
	}
	require.NoError(t, bs.Close())
	require.Equal(t, plan.StateRunning, storeState(t, e.store, "p1"))

	// The clock is stepped back to the right time; the operator stops p1.
	var out, errw bytes.Buffer
	e.out, e.errw = &out, &errw
	code := e.command("stop", []string{"p1", "--store", e.store})
	t.Logf("rebootctl plan stop p1: exit %d, %q %q", code, out.String(), errw.String())
	assert.Equal(t, plan.StateStopped, storeState(t, e.store, "p1"),
		"p1's state in the store after the operator's stop (told: %q, exit %d): the stop was taken as applied already", out.String(), code)

	ex := &plan.Executor{Fleet: fleet, Store: lockedStore{e}, Now: clk.Now}
	_, err = ex.Pass(e.ctx, "p1")
	require.NoError(t, err)
	assert.Empty(t, fleet.JobsCreated(), "jobs of p1 started after the operator was told it stopped")
}

// TestReview37x_ForeignFleetSwappedPastRecheck: round 21's executorOwns
// looks at the fleet state file's path (os.Lstat), before OpenFleet and
// again after it, never at the file the executor opened. In a sticky
// world-writable directory (TestExecutor_RefusesForeignFilesInOpenDir's
// layout) another local user makes FILE.fleet after the first check
// (while the executor claims the store), keeps it open, and removes it
// (its own file: the sticky bit lets its owner) once the executor has
// opened it: the second check finds no file and passes, and the executor
// keeps its power bookkeeping for the rest of its run in an inode that
// user holds open for writing (and that no later executor finds: the
// next start makes a new, empty FILE.fleet). The refusal must judge the
// file opened (its fstat), not the name. Ground truth: the executor's
// exit (it ran to its deadline instead of refusing) and the bytes the
// executor wrote into the other user's open file.
func TestReview37x_ForeignFleetSwappedPastRecheck(t *testing.T) {
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
	fleet := store + ".fleet"
	ctl := func(timeout time.Duration, args ...string) (int, string) {
		var errw bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		code := run(ctx, append(args, "--store", store, "--inventory", invPath), io.Discard, &errw)
		return code, errw.String()
	}
	code, msg := ctl(5*time.Second, "plan", "create", "--all", "--target", "2", "--uuid", "p1")
	require.Equal(t, exitOK, code, msg)

	// fdsOn lists this process's descriptors open on path.
	fdsOn := func(path string) []int {
		ents, _ := os.ReadDir("/proc/self/fd")
		var fds []int
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == path {
				n, _ := strconv.Atoi(e.Name())
				fds = append(fds, n)
			}
		}
		return fds
	}
	// Mallory: waits for the executor to open the store (its checks
	// are behind it), makes FILE.fleet and keeps it open, then removes
	// it as soon as the executor has opened it too. The two cores are
	// shared: an attempt where Mallory came too late (the executor made
	// FILE.fleet itself) is tried again.
	attempt := func() (int, string, *os.File) {
		held := make(chan *os.File, 1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(fdsOn(store)) == 0 {
				select {
				case <-stop:
					held <- nil
					return
				default:
				}
			}
			// Mallory's file is hers from the moment it has its name:
			// made under another name, given to her, then renamed
			// into place unless the executor made FILE.fleet first
			// (a create then a chown under the name let the executor
			// open it, root's, in between: 1 failure in 30 runs).
			tmp := fleet + ".mallory"
			f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
			if err != nil {
				held <- nil
				return
			}
			if err := f.Chown(mallory, mallory); err != nil {
				_ = f.Close()
				_ = os.Remove(tmp)
				held <- nil
				return
			}
			if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, fleet, unix.RENAME_NOREPLACE); err != nil {
				_ = f.Close()
				_ = os.Remove(tmp)
				held <- nil
				return
			}
			held <- f
			for len(fdsOn(fleet)) < 2 {
				select {
				case <-stop:
					return
				default:
				}
			}
			_ = os.Remove(fleet)
		}()
		code, msg := ctl(2*time.Second, "executor", "--self", "none")
		close(stop)
		wg.Wait()
		return code, msg, <-held
	}
	var mf *os.File
	for range 5 {
		_ = os.Remove(fleet)
		code, msg, mf = attempt()
		if mf != nil {
			break
		}
		t.Logf("Mallory came too late (executor: exit %d): again", code)
	}
	require.NotNil(t, mf, "Mallory's file was never made first in 5 attempts")
	defer mf.Close()
	fi, err := mf.Stat()
	require.NoError(t, err)
	t.Logf("executor: exit %d, %q; Mallory's open file: %d bytes", code, msg, fi.Size())
	assert.Equal(t, exitError, code, "the executor ran on with another user's fleet state file (it did not refuse it)")
	assert.Contains(t, msg, "the fleet state file")
}
