//go:build e2e

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// copyFile copies src to dst (mode 0600).
func review37aaCopy(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestReview37aa_StaleCopyOfFleetFileTakesOver (review 37 round 24): the
// fleet state file is told by the random ID kept in it (Fleet.ID), and a
// copy of the file has the same ID. The operator keeps a copy of the
// fleet state file taken before the plan (a backup, a VM snapshot, a file
// copied to the standby machine). The executor then powers a server off
// and owes it its power-on (the BMC refuses the on, busy); the operator
// cancels the plan and stops that executor (its lease released). An
// executor started with the stale copy (same ID) is taken for the owner
// of the jobs (sameState), so inFlightElsewhere is skipped: it knows
// nothing of the job that powered the server off, takes it for lost,
// releases the canceled plan's reboot, and nothing ever powers the
// server on although its BMC answers again. Ground truth: the emulated
// BMC's hardware state. Expected: the executor with the stale copy is
// refused (it is not the file the jobs are in), or the server is powered
// on again.
func TestReview37aa_StaleCopyOfFleetFileTakesOver(t *testing.T) {
	l := newLab(t, 1, 0)
	id := l.ids[0]
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	l.powers[id].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		return fake.Fault{}
	}})
	const uuid = "e2e-stale-copy"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid)
	require.Equal(t, exitOK, code, errs)
	fleetFile := l.store + ".fleet"

	// A first run before the plan runs: the fleet state file gets its ID.
	warm, _ := l.executorWith("warm.log", nil)
	eventually(t, 30*time.Second, func() string {
		if _, err := os.Stat(fleetFile); err != nil {
			return "no fleet state file yet"
		}
		return ""
	})
	time.Sleep(time.Second)
	require.NoError(t, warm.Process.Signal(os.Interrupt))
	_, _ = warm.Process.Wait()
	backup := filepath.Join(l.dir, "backup.fleet")
	review37aaCopy(t, fleetFile, backup) // the operator's copy, taken now

	_, errs, code = l.ctl("plan", "run", uuid)
	require.Equal(t, exitOK, code, errs)
	first, _ := l.executorWith("first.log", nil)
	eventually(t, 30*time.Second, func() string {
		if l.powers[id].HardwareOn() {
			return "the server is not powered off yet"
		}
		return ""
	})
	out, errs, code := l.ctl("plan", "cancel", uuid)
	require.Equal(t, exitOK, code, errs)
	t.Logf("cancel: %s", out)
	require.NoError(t, first.Process.Signal(os.Interrupt))
	_, _ = first.Process.Wait()
	require.False(t, l.powers[id].HardwareOn(), "the first executor powered the server on before it stopped")
	before := l.get(uuid)
	rawBefore, _ := plan.Encode(before)
	t.Logf("before the second executor: plan %s, reboot step %s: %s", before.State, before.Reboots[0].Step, rawBefore)
	refuseOn.Store(false) // the BMC answers again

	second, logPath := l.executorWith("second.log", nil, "--state", backup)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			require.True(t, strings.Contains(string(log), "fleet state file"), "the second executor stopped: %s", log)
			return // refused, naming the state file that owes the power-on: fine
		case <-deadline:
			p := l.get(uuid)
			raw, _ := plan.Encode(p)
			t.Logf("plan: %s", raw)
			t.Fatalf("an executor started with a stale copy of the fleet state file (same ID) took over while the canceled plan's server cn0, powered off by the first, is owed its power-on: "+
				"the server is still off 20 s later (ground truth), plan %s:\n%s", p.State, plan.Table(p))
		case <-time.After(100 * time.Millisecond):
			if l.powers[id].HardwareOn() {
				return // powered on again: fine
			}
		}
	}
}

// TestReview37aa_TimedOutPowerCycleLostToOtherStateExecutor (review 37
// round 24): a job gives up on its power cycle at the job timeout (the
// BMC refuses every power-on, busy): the plan records the reboot failed
// and ends failed, and the fleet state file keeps the unsettled power
// cycle (inventory's doc: "the fleet keeps reconciling the server ... it
// only powers it on if it reads off"). That executor stops (its lease
// released). An executor started next with another fleet state file is
// let in at once: inFlightElsewhere counts only reboots in their job or
// cancel step, and this one is failed, though its power-on is owed by the
// first file. The BMC answers again, yet nothing ever powers the server
// on. Ground truth: the emulated BMC's hardware state. Expected: the
// second executor is refused (naming the first's state file) or the
// server is powered on again.
func TestReview37aa_TimedOutPowerCycleLostToOtherStateExecutor(t *testing.T) {
	l := newLab(t, 1, 0)
	id := l.ids[0]
	var refuseOn atomic.Bool
	refuseOn.Store(true)
	l.powers[id].SetConfig(fake.PowerConfig{Lag: 100 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuseOn.Load() {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		return fake.Fault{}
	}})
	const uuid = "e2e-timeout-owed-on"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, exitOK, code, errs)
	first, _ := l.executorWith("first.log", nil, "--job-timeout", "4s")
	p := l.waitFor(uuid, "the plan to end failed", time.Minute, func(p plan.Plan) bool { return !p.Unfinished() })
	t.Logf("after the job timeout: plan %s, reboot step %s, error %q", p.State, p.Reboots[0].Step, p.Reboots[0].Error)
	require.NoError(t, first.Process.Signal(os.Interrupt))
	_, _ = first.Process.Wait()
	require.False(t, l.powers[id].HardwareOn(), "the first executor powered the server on before it stopped")
	refuseOn.Store(false) // the BMC answers again

	other := filepath.Join(l.dir, "other.fleet")
	second, logPath := l.executorWith("second.log", nil, "--state", other)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			require.True(t, strings.Contains(string(log), "fleet state file"), "the second executor stopped: %s", log)
			return // refused, naming the state file that owes the power-on: fine
		case <-deadline:
			p := l.get(uuid)
			t.Fatalf("an executor with another fleet state file took over while the failed plan's server cn0, left off by the first's timed-out power cycle, is owed its power-on: "+
				"the server is still off 20 s later (ground truth), plan %s:\n%s", p.State, plan.Table(p))
		case <-time.After(100 * time.Millisecond):
			if l.powers[id].HardwareOn() {
				return // powered on again: fine
			}
		}
	}
}

// TestReview37aa_UndrainLostToOtherStateExecutor (review 37 round 24): a
// job's power cycle finished (the server reads on again), so the plan's
// reboot is in wait_services, while the job itself still waits for the
// health check to undrain the server (inventory's doc: "every end of a
// job undoes its drain"). That executor stops (its lease released). An
// executor started next with another fleet state file is let in at
// once: inFlightElsewhere counts only reboots in their job or cancel
// step, so this one, whose undrain only the first file's job owes, is
// not found. The health check passes, the plan completes, and the
// server is never undrained. Ground truth: the drain command's own log
// (one line per drain and undrain run). Expected: the second executor is
// refused (naming the first's state file), or the server is undrained.
func TestReview37aa_UndrainLostToOtherStateExecutor(t *testing.T) {
	l := newLab(t, 1, 0)
	id := l.ids[0]
	l.mu.Lock()
	l.bootTime = 6 * time.Second // the services take a while after the power-on
	l.mu.Unlock()
	const uuid = "e2e-undrain-owed"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
	require.Equal(t, exitOK, code, errs)
	first, _ := l.executorWith("first.log", nil)
	p := l.waitFor(uuid, "the power cycle to finish", time.Minute, func(p plan.Plan) bool { return p.Reboots[0].Step == plan.StepServices })
	require.NoError(t, first.Process.Signal(os.Interrupt))
	_, _ = first.Process.Wait()
	drainLog := filepath.Join(l.dir, id+".log")
	raw, _ := os.ReadFile(drainLog)
	t.Logf("first executor stopped: reboot step %s; drain log %q", p.Reboots[0].Step, raw)
	require.NotContains(t, string(raw), "undrain", "the first executor undrained before it stopped: the test needs a slower boot")

	other := filepath.Join(l.dir, "other.fleet")
	second, logPath := l.executorWith("second.log", nil, "--state", other)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			require.True(t, strings.Contains(string(log), "fleet state file"), "the second executor stopped: %s", log)
			return // refused, naming the state file that owes the undrain: fine
		case <-deadline:
			p := l.get(uuid)
			raw, _ := os.ReadFile(drainLog)
			t.Fatalf("an executor with another fleet state file took over while cn0's job, in the first file, still owed its undrain: 30 s later the server was never undrained "+
				"(drain log %q), plan %s:\n%s", raw, p.State, plan.Table(p))
		case <-time.After(200 * time.Millisecond):
			if raw, _ := os.ReadFile(drainLog); strings.Contains(string(raw), "undrain") {
				return // undrained: fine
			}
		}
	}
}

// TestReview37aa_PausedExecutorRunsOnWithoutLease (review 37 round 24):
// executor B is paused (SIGSTOP: a VM paused, a process stopped) longer
// than its lease. Executor A, with another fleet state file, takes the
// store over (no reboot is in flight), starts a reboot (its job drains
// cn0) and dies; its lease lapses, still naming its file. B resumes. Its
// next claim fails with errOtherState (A's reboot is in flight in A's
// file), but the executor's loop stops only on errOtherExecutor and
// ignores every other claim error: B runs its passes without holding the
// lease. It does not know A's job, takes it for one the fleet collected
// after it ended ("seen once, gone now"), and the plan records cn0
// rebooted though it was never powered off; then it starts cn1's reboot
// (drains it), whose power-off its own lease check refuses. Ground
// truth: the emulated BMCs' power history and the drain commands' log.
// Expected: B stops (refused, as a start would be), or at least records
// nothing done that was not rebooted and drains nothing.
func TestReview37aa_PausedExecutorRunsOnWithoutLease(t *testing.T) {
	l := newLab(t, 2, 0, func(i int, lines string) string {
		if i != 0 {
			return lines
		}
		// cn0's drain takes a while: the executor dies in it.
		return strings.Replace(lines, `"echo drain >> `, `"echo start >> `+l0dir(lines)+`; sleep 6; echo drain >> `, 1)
	})
	cn0, cn1 := l.ids[0], l.ids[1]
	const uuid = "e2e-paused-executor"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid)
	require.Equal(t, exitOK, code, errs)

	b, bLog := l.executorWith("b.log", nil)
	eventually(t, 30*time.Second, func() string {
		if log, _ := os.ReadFile(bLog); !strings.Contains(string(log), "resuming running plans") {
			return "executor B has not started"
		}
		return ""
	})
	time.Sleep(time.Second)
	require.NoError(t, b.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = b.Process.Signal(syscall.SIGCONT) })
	time.Sleep(11500 * time.Millisecond) // B's lease lapses (3 intervals and 10 s)

	_, errs, code = l.ctl("plan", "run", uuid)
	require.Equal(t, exitOK, code, errs)
	a, _ := l.executorWith("a.log", nil, "--state", filepath.Join(l.dir, "a.fleet"))
	eventually(t, 30*time.Second, func() string {
		p := l.get(uuid)
		if p.Reboots[0].Step != plan.StepJob || !p.Reboots[0].JobSeen {
			return "A's job of cn0 is not seen yet"
		}
		return ""
	})
	require.NoError(t, a.Process.Kill()) // A dies in cn0's drain
	_, _ = a.Process.Wait()
	time.Sleep(11500 * time.Millisecond) // A's lease lapses

	require.NoError(t, b.Process.Signal(syscall.SIGCONT))
	done := make(chan error, 1)
	go func() { done <- b.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(bLog)
			t.Logf("B stopped: %s", log)
			return // refused: fine
		case <-deadline:
			p := l.get(uuid)
			t.Fatalf("executor B runs passes 30 s after it resumed, without the store's lease (A's, with A's reboot of cn0 in flight), plan %s:\n%s", p.State, plan.Table(p))
		case <-time.After(200 * time.Millisecond):
			p := l.get(uuid)
			if p.Reboots[0].Step == plan.StepDone && l.offs()[cn0] == 0 {
				t.Fatalf("executor B, resumed without the store's lease, recorded cn0 rebooted though it was never powered off (ground truth: %d power-offs):\n%s", l.offs()[cn0], plan.Table(p))
			}
			if raw, _ := os.ReadFile(filepath.Join(l.dir, cn1+".log")); strings.Contains(string(raw), "drain") {
				t.Fatalf("executor B, resumed without the store's lease, started cn1's reboot (drained it: %q):\n%s", raw, plan.Table(p))
			}
		}
	}
}

// l0dir is the lab's directory, taken from a server's inventory lines
// (its drain log's path).
func l0dir(lines string) string {
	i := strings.Index(lines, `echo drain >> `)
	rest := lines[i+len(`echo drain >> `):]
	return rest[:strings.Index(rest, `"`)]
}
