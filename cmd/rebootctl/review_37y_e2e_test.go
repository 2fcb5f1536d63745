//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// TestReview37_CanceledPowerCycleLostToOtherStateExecutor (review 37
// round 23): an executor powers a server off and owes it its power-on
// (the BMC refuses the on, busy); the operator cancels the plan (told:
// a server whose power-off was accepted "completes its power cycle (on
// again)") and stops that executor, which gives up its lease (release).
// An executor started next with another fleet state file is let in at
// once: inFlightElsewhere skips finished plans, so the canceled plan's
// reboot in its job step, whose power-on only the first fleet state file
// knows, is not found. The BMC is healthy again, yet nothing ever powers
// the server on. Ground truth: the emulated BMC's hardware state.
// Expected: the second executor is refused (naming the first's state
// file) or the server is powered on again.
func TestReview37_CanceledPowerCycleLostToOtherStateExecutor(t *testing.T) {
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
	const uuid = "e2e-cancel-owed-on"
	_, errs, code := l.ctl("plan", "create", "--all", "-N", "1", "--target", "2", "--uuid", uuid, "-r")
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
	t.Logf("before the second executor: plan %s, reboot step %s", before.State, before.Reboots[0].Step)
	refuseOn.Store(false) // the BMC answers again

	other := filepath.Join(l.dir, "other.fleet")
	second, logPath := l.executorWith("second.log", nil, "--state", other)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			require.True(t, strings.Contains(string(log), "used another fleet state file"), "the second executor stopped: %s", log)
			return // refused, naming the state file that owes the power-on: fine
		case <-deadline:
			p := l.get(uuid)
			t.Fatalf("an executor with another fleet state file took over while the canceled plan's server %s, powered off by the first, is owed its power-on: "+
				"the server is still off 15 s later (ground truth), plan %s:\n%s", "cn0", p.State, plan.Table(p))
		case <-time.After(100 * time.Millisecond):
			if l.powers[id].HardwareOn() {
				return // powered on again: fine
			}
		}
	}
}
