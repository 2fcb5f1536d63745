package inventory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// TestReview38g_CommandTimeoutBoundsWrapperScript: the doc says the
// executor's own reboot command "may hang up to the command timeout" (and
// while it runs, selfCmds holds every other power-off of the fleet). A
// reboot (or drain/undrain) command that is a wrapper script whose child
// keeps the output pipe open is not bounded: exec.CommandContext kills the
// script at the timeout, but CombinedOutput waits for the pipe to close
// (no cmd.WaitDelay), i.e. for the grandchild to exit. Here the command
// timeout is 1s and the script's child sleeps 20s: the command must return
// within a few seconds of its timeout, and the fleet must hold the other
// servers' power-offs no longer than that.
func TestReview38g_CommandTimeoutBoundsWrapperScript(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	w.ownServer(ids[0], "sh", "-c", "sleep 20; echo rebooted")
	w.openForTest(t)
	w.realCommands(time.Second)

	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.f.command(context.Background(), w.inv.Servers[0].Reboot) }()
	select {
	case <-done:
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("command with a 1s command timeout returned after %s", el)
		}
	case <-time.After(6 * time.Second):
		t.Fatalf("a reboot command with command_timeout 1s still runs %s later: its script was killed but its child holds the output pipe "+
			"(exec.CommandContext + CombinedOutput without WaitDelay); while a self reboot command runs (selfCmds) every other power-off is held, "+
			"so the cut-off 'up to the command timeout' is not bounded", time.Since(start).Round(time.Second))
	}
}

// TestReview38g_SelfRebootCommandNotRunAfterPlanCancelled: a power-off is
// sent only while (Options.PlanCheck) the job's plan still runs it, asked
// "right before the first power-off of a reboot" (doc.go, fleet.go); the
// executor's own server's reboot command is that first power-off, but it
// is never checked: the plan is cancelled in the store after the self
// job was created (the executor's next pass has not run yet) and the
// fleet still runs the reboot command and reboots the executor's machine.
// A BMC server in the same place is refused by the gate and its job
// cancelled.
func TestReview38g_SelfRebootCommandNotRunAfterPlanCancelled(t *testing.T) {
	w, _, self := newOwnWorld(t, 1, 1, 0)
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 30 && w.f.lastJob[self] == ""; i++ {
		w.pass()
		w.clk.Advance(time.Second)
	}
	if w.f.lastJob[self] == "" {
		t.Fatal("no job for the executor's own server")
	}
	if _, err := plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		w.step(self) // the worker's steps, before the executor's next pass
		w.clk.Advance(time.Second)
	}
	if w.osReboots[self] != 0 || w.boot[self] != "boot-a" {
		j, _, _ := w.f.job(w.f.lastJob[self])
		t.Fatalf("the plan was cancelled before the reboot command of the executor's own server, which ran all the same (%d OS reboots; job %s %q): "+
			"the self reboot never asks Options.PlanCheck", w.osReboots[self], j.State, j.Error)
	}
}

// TestReview38g_SelfRebootCommandNotRunWithoutLease: PlanCheck also says
// "no power-off unless this executor still holds the store" (a second
// executor took it over). The self reboot command never asks it: an
// executor that lost the plan store still reboots its own machine.
func TestReview38g_SelfRebootCommandNotRunWithoutLease(t *testing.T) {
	w, ids, self := newOwnWorld(t, 1, 1, 0)
	w.clk.Advance(time.Minute)
	w.newPlan()
	asked := 0
	w.f.opts.PlanCheck = func(context.Context, string, string) (bool, string, error) {
		asked++
		return false, "", errors.New("rebootctl: another executor holds the plan store")
	}
	for i := 0; i < 30 && w.osReboots[self] == 0; i++ {
		w.run(ids, time.Second)
	}
	if w.osReboots[self] != 0 {
		t.Fatalf("an executor that no longer holds the plan store (PlanCheck: no, asked %d times) ran its own server's reboot command", asked)
	}
}

// TestReview38g_CancelledSelfJobNeverRunsRebootCommand: the executor is
// killed right after the executor's own server's job moved to
// self_rebooting, before the command was sent. While it is down the
// operator cancels the plan; restarted, its pass cancels the job (the
// job record says Cancel). decideJob's JobSelfReboot case never looks at
// Cancel before sending: the cancelled job runs the reboot command and
// reboots the machine ("after a plan is cancelled nothing of it may
// start or power").
func TestReview38g_CancelledSelfJobNeverRunsRebootCommand(t *testing.T) {
	w, _, self := newOwnWorld(t, 1, 1, 0)
	w.clk.Advance(time.Minute)
	w.newPlan()
	crashed := w.crashAt("job "+JobSelfReboot+" none", true)
	for i := 0; i < 30 && !crashed(); i++ {
		w.pass()
		w.step(self) // died(): the executor restarts on the same boot
		w.clk.Advance(time.Second)
	}
	if !crashed() {
		t.Fatal("the self job never reached self_rebooting")
	}
	if _, err := plan.Command(w.ctx(), w.store, w.plans[0], plan.Cancel); err != nil {
		t.Fatal(err)
	}
	w.pass() // the restarted executor's pass: the plan's cancel reaches the job
	jobs, err := w.f.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	var j JobRecord
	for _, x := range jobs {
		if x.Server == self {
			j = x
		}
	}
	if j.State != JobSelfReboot || !j.Cancel || j.RebootSentBoot != "" {
		t.Skipf("setup: job %s cancel %v sent %q", j.State, j.Cancel, j.RebootSentBoot)
	}
	for i := 0; i < 10; i++ {
		w.step(self)
		w.clk.Advance(time.Second)
	}
	if w.osReboots[self] != 0 {
		j, _, _ := w.f.job(j.UUID)
		t.Fatalf("the job of the executor's own server was cancelled (its plan cancelled) before its reboot command was sent, and the command ran all the same: job %s %q",
			j.State, j.Error)
	}
}

// TestReview38g_DrainInterruptStopsWrapperScript: a cancel or an abandon
// interrupts a running drain (issue 38 point 14: "a running drain is not
// interrupted by a cancel (up to 15 min)"); with a drain command that is a
// wrapper script (its child, kubectl drain say, keeps the output pipe
// open), the interrupt kills the script but f.command waits for the pipe:
// the drain, and the job's slot, run on until the child ends (here 20s,
// in the field up to the drain's own timeout or for ever).
func TestReview38g_DrainInterruptStopsWrapperScript(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.inv.Servers[0].Drain = []string{"sh", "-c", "sleep 20; echo drained"}
	w.openForTest(t)
	w.realCommands(0)
	s, _ := w.f.inv.Server(ids[0])
	j := JobRecord{UUID: "job-review-38g", Server: ids[0]}
	done := make(chan error, 1)
	go func() { done <- w.f.drain(context.Background(), s, j) }()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	w.f.interruptDrain(j.UUID)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the drain was interrupted (a cancel) and still runs %s later: the killed script's child holds the output pipe "+
			"(exec.CommandContext + CombinedOutput without WaitDelay)", time.Since(start).Round(time.Second))
	}
}

// TestReview38g_GateOpenBetweenSentAndSelfCmd: "self last, alone": while
// the executor's own reboot command may run, no other server is powered
// off. stepJob persists RebootSentBoot (job record), then act writes the
// host's SelfRebootBoot, then marks selfCmds, then runs the command. In
// between, with the executor up longer than ShutdownMax, mayPowerOff lets
// another server's power-off through: the self-job hold needs "not sent,
// or before offHorizon" (sent, and start+ShutdownMax passed), the
// pending-record hold needs SelfRebootBoot (not written yet) and selfCmds
// is not set yet. Workers run one goroutine per server, so another
// server's power-off can land in that window (two bolt writes wide) and
// then the executor reboots itself while that server is off. Shown here
// by asking the gate at the first clock read of act (right after the
// "sent" write), the other server live in its reboot step, held so far.
func TestReview38g_GateOpenBetweenSentAndSelfCmd(t *testing.T) {
	w, ids, self := newOwnWorld(t, 2, 2, 0)
	other := ids[1]
	w.clk.Advance(time.Minute)
	w.newPlan()
	crashed := w.crashAt("job "+JobSelfReboot+" none", true)
	for i := 0; i < 30 && !crashed(); i++ {
		w.pass()
		w.step(self)
		w.clk.Advance(time.Second)
	}
	if !crashed() {
		t.Fatal("setup: the self job never reached self_rebooting")
	}
	// The other server's job reaches its reboot step; its power-off is
	// held while the executor's own reboot is not sent.
	var oj JobRecord
	for i := 0; i < 200; i++ {
		w.pass()
		w.step(other)
		w.clk.Advance(time.Second)
		if id := w.f.lastJob[other]; id != "" {
			oj, _, _ = w.f.job(id)
		}
	}
	if oj.State != JobRebooting {
		t.Skipf("setup: other job %s", oj.State)
	}
	if sj, _, _ := w.f.job(w.f.lastJob[self]); sj.RebootSentBoot != "" || w.osReboots[self] != 0 {
		t.Skipf("setup: self job already sent at %v (now %v), os reboots %d", sj.RebootSentAt, w.clk.Now(), w.osReboots[self])
	}
	for _, o := range w.bmcs[other].offs {
		if o.applied {
			t.Fatalf("setup: the other server was powered off while the self job was in self_rebooting")
		}
	}
	orig, origNow := w.f.opts.crash, w.f.opts.Now
	armed, asked := false, false
	why := "not asked"
	w.f.opts.crash = func(p string) bool {
		if p == "job "+JobSelfReboot+" "+actSelfReboot.String() {
			armed = true
		}
		return orig != nil && orig(p)
	}
	origNow = w.f.now
	w.f.now = func() time.Time {
		if armed {
			armed, asked = false, true
			h, err := w.f.hosts.load(other)
			if err == nil {
				why = w.f.mayPowerOff(w.ctx(), other, h)
			}
		}
		return origNow()
	}
	w.step(self)
	if !asked {
		sj, _, _ := w.f.job(w.f.lastJob[self])
		t.Skipf("setup: the window was not reached: self job %s sent %q err %q mono %v", sj.State, sj.RebootSentBoot, sj.Error, w.f.mono())
	}
	if why == "" {
		t.Fatalf("after the executor's own reboot was recorded sent and before its command ran, the gate let another server's power-off through " +
			"(its server would be off while the executor reboots itself)")
	}
}
