package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// The scenario world of the review tests of the executor's own server
// (review_38e, review_38f, review_38g, review_38h, selfcmd38): a
// newWorld whose server ids[0] runs the executor (--self) and reboots
// through its OS. (issue38_test.go's selfWorld is another world: its own
// BootID and command hooks.)

// newOwnWorld is newWorld(t, n, conc) with the given failure budget,
// whose server ids[0] (self) runs the executor and reboots through its
// reboot command {"reboot-self", self} (the world's runCommand: an OS
// reboot, its boot ID changes at once); the fleet is open (closed when
// the test ends) and self's boot ID is "boot-a".
func newOwnWorld(t *testing.T, n, conc, budget int) (w *world, ids []string, self string) {
	w, ids = newWorld(t, n, conc)
	w.budget = budget
	self = ids[0]
	w.ownServer(self, "reboot-self", self)
	w.openForTest(t)
	w.boot[self] = "boot-a"
	return w, ids, self
}

// ownServer makes server the one the executor runs on (Options.Self),
// rebooted through the command argv. Call it before the fleet is opened.
func (w *world) ownServer(server string, argv ...string) {
	for i := range w.inv.Servers {
		if w.inv.Servers[i].UUID == server {
			w.inv.Servers[i].Reboot = argv
		}
	}
	w.self = server
}

// openForTest opens the fleet and closes the one open when the test ends
// (a test may close and open it again in between).
func (w *world) openForTest(t *testing.T) {
	w.open()
	t.Cleanup(w.close)
}

// realCommands makes the fleet run its drain, undrain and reboot
// commands for real (the command runner of command.go, not the world's),
// with the given command timeout (0: the inventory's).
func (w *world) realCommands(timeout time.Duration) {
	w.f.opts.command = nil
	if timeout > 0 {
		w.f.inv.Defaults.CommandTimeout = Duration(timeout)
	}
}

// selfRebootCmd replaces the world's command runner: the first run of
// the own server's reboot command ("reboot-self") calls run (nil: none;
// run may move the clock, as a command that hangs does) and answers its
// error; every other command succeeds and does nothing. The function it
// returns tells when (real time) that first run returned, zero before.
func (w *world) selfRebootCmd(run func() error) func() time.Time {
	var ranAt time.Time
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] != "reboot-self" || !ranAt.IsZero() {
			return nil
		}
		var err error
		if run != nil {
			err = run()
		}
		ranAt = w.clk.Real()
		return err
	}
	return func() time.Time { return ranAt }
}

// runPlanUntilSelfCmd moves the clock a minute on (every server booted),
// creates and runs a plan, then runs the world (w.run: invariants
// checked) a second at a time, at most 300 times, until ran (from
// selfRebootCmd) says the own server's reboot command ran. It returns
// ran's answer: zero if the command never ran.
func (w *world) runPlanUntilSelfCmd(ids []string, ran func() time.Time) time.Time {
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 300 && ran().IsZero(); i++ {
		w.run(ids, time.Second)
	}
	return ran()
}

// tick runs the executor for one second without checking the world's
// invariants (w.run does): a plan pass, a step of every server (a killed
// executor is restarted, as w.step does), then the clock moves on.
func (w *world) tick(ids []string) {
	w.pass()
	w.stepAll(ids)
	w.clk.Advance(time.Second)
}

// tickRaw is a plan pass and a bare step of every server (no restart: an
// executor killed at a crash point stays dead until the test opens the
// fleet again), then the clock moves on by d.
func (w *world) tickRaw(ids []string, d time.Duration) {
	w.pass()
	for _, id := range ids {
		w.f.stepServer(w.ctx(), id)
	}
	w.clk.Advance(d)
}

// crashAt makes the executor die at the crash point named point: at its
// first reach only (once), or at every reach from then on. The function
// it returns tells whether it died.
func (w *world) crashAt(point string, once bool) func() bool {
	died := false
	w.f.opts.crash = func(p string) bool {
		if p == point && !(once && died) {
			died = true
			return true
		}
		return died && !once
	}
	return func() bool { return died }
}

// planTable is the first plan as plan.Table prints it, for a failure
// message.
func (w *world) planTable() string {
	p, _ := w.store.Get(w.ctx(), w.plans[0])
	return plan.Table(p)
}

// lateOSReboot is a reboot of the executor's own server, sent through
// its OS earlier, that lands at at: the server goes off (ground truth)
// with a new boot ID, "boot-b", and is powered on 20s later.
type lateOSReboot struct {
	server string
	at     time.Time
	landed bool
}

// play applies the reboot as the clock has moved: call it after every
// tick.
func (r *lateOSReboot) play(w *world) {
	p := w.bmcs[r.server].p
	if !r.landed && !w.clk.Real().Before(r.at) {
		r.landed = true
		p.OutOfBandOff()
		w.boot[r.server] = "boot-b"
	}
	if r.landed && w.clk.Real().After(r.at.Add(20*time.Second)) && !p.HardwareOn() {
		p.OutOfBandOn()
	}
}

// firstOffIn is the first power-off (ground truth) of one of ids strictly
// between from and to: its server and time, ok false if none.
func (w *world) firstOffIn(ids []string, from, to time.Time) (id string, at time.Time, ok bool) {
	for _, id := range ids {
		for _, tc := range w.bmcs[id].p.Truth() {
			if !tc.On && tc.At.After(from) && tc.At.Before(to) {
				return id, tc.At, true
			}
		}
	}
	return "", time.Time{}, false
}
