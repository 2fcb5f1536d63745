package inventory

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReview38_SlowSelfRebootCommandCutOffFromItsStart (review 38 round
// 5): cn0 runs the executor; its reboot command hangs 8 minutes (under
// the 15 min command timeout, longer than ShutdownMax, 6 min: a
// `systemctl reboot` blocked on a busy systemd, an ssh to the host) and
// then times out, accepted all the same: the reboot lands a minute after
// the command returned. The cut-off of "a reboot command that may still
// land" is counted from before the command ran (worker.go act: noteOff
// and SelfRebootAt before f.command), so it has passed when the command
// returns: the job fails at once (selfRebootGrace also counts from before
// the command), cn0's health check passes (begun after the cut-off) and
// clears the record, and the plan powers off cn1 while cn0's reboot is
// still to come. Ground truth: a server powered off after the command
// returned and before the reboot it may have been accepted landed.
// Expected: as for a BMC power-off (bounded by CallTimeout), the cut-off
// counts from when the command ended (returned or was killed), not from
// when it started.
func TestReview38_SlowSelfRebootCommandCutOffFromItsStart(t *testing.T) {
	w, ids, self := newOwnWorld(t, 3, 1, 3)
	w.f.opts.ShutdownMax = 6 * time.Minute
	ran := w.selfRebootCmd(func() error {
		w.clk.Advance(8 * time.Minute) // hangs, then is killed: it may have been accepted
		return context.DeadlineExceeded
	})
	returnedAt := w.runPlanUntilSelfCmd(ids, ran)
	require.False(t, returnedAt.IsZero(), "cn0's reboot command ran")
	lands := returnedAt.Add(time.Minute)
	r := lateOSReboot{server: self, at: lands}
	for w.clk.Real().Before(lands.Add(time.Minute)) {
		w.tick(ids)
		r.play(w)
		if n := maxOff(w.bmcs); n > w.conc {
			t.Fatalf("%d servers off at once at %s, concurrency %d: cn0's reboot (its command hung until %s) landed while the plan had powered off another server\n%s",
				n, w.clk.Real(), w.conc, returnedAt, w.planTable())
		}
	}
	if id, at, ok := w.firstOffIn(ids[1:], returnedAt.Add(-time.Second), lands); ok {
		t.Fatalf("%s powered off at %s, while the executor's own reboot (its command hung until %s and timed out) could still land (it did at %s)\n%s",
			id, at, returnedAt, lands, w.planTable())
	}
}

// TestReview38_MovedExecutorRunsOldSelfRebootCommand (review 38 round
// 5): cn0 runs the executor (Self) and its job moves to self_rebooting
// (JobSelfReboot recorded); the executor is killed before the next step
// records "sent on this boot" and runs cn0's reboot command. The
// operator restarts the executor on another machine (--self none: it no
// longer runs on cn0, as the brief's "executor restarted on another
// machine, --self changed" has it). The restarted fleet steps cn0's job:
// decideJob's JobSelfReboot branch never asks whether the job's server is
// still this executor's (in.Self), so it records "sent" and runs cn0's
// reboot command (`systemctl reboot`: a local command) on the machine it
// now runs on: it reboots the executor's new machine, not cn0, without
// "self last, alone" (OthersBusy is only asked in JobDrained). Ground
// truth: the commands the restarted executor ran. Expected: a job whose
// server is no longer this executor's never runs its server's reboot
// command; it ends (undrained, failed: "the executor no longer runs on
// this server") or waits.
func TestReview38_MovedExecutorRunsOldSelfRebootCommand(t *testing.T) {
	w, ids, self := newOwnWorld(t, 2, 1, 3)
	crashed := w.crashAt("job "+JobSelfReboot+" none", false)
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 300 && !crashed(); i++ {
		w.tickRaw(ids, time.Second)
	}
	require.True(t, crashed(), "cn0's job reached self_rebooting")
	j, ok, err := w.f.job(w.f.lastJob[self])
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, JobSelfReboot, j.State)
	require.NotEqual(t, j.BootID, j.RebootSentBoot, "killed before \"sent\" was recorded")
	_ = w.f.Close()
	// Restarted on another machine: --self none.
	w.self = ""
	w.open()
	var ran []string
	w.f.opts.command = func(_ context.Context, argv []string) error {
		ran = append(ran, strings.Join(argv, " "))
		return nil
	}
	for range 120 {
		w.tickRaw(ids, time.Second)
	}
	for _, c := range ran {
		if strings.HasPrefix(c, "reboot-self") {
			t.Fatalf("the executor, restarted on another machine (--self none), ran cn0's reboot command %q: it reboots the machine it runs on, not cn0 (commands run: %q)\n%s",
				c, ran, w.planTable())
		}
	}
}

// TestReview38_AbandonedDeadSelfServerCannotLeaveInventory (review 38
// round 5, Low): cn0 runs the executor and reboots through its reboot
// command; the reboot lands and cn0 never comes back (its hardware died
// in the reboot). Its job fails at the job timeout; the operator
// abandons cn0 (the way to give up on one server) and, the
// machine being gone, takes it out of the inventory and restarts the
// executor (elsewhere). A BMC-rebooted server abandoned mid-cycle may be
// removed (needsKeeping skips abandoned records: "removing it is their
// call"), but cn0's SelfRebootBoot is only cleared by a new boot ID read
// while it is --self or a passing health check: OpenFleet refuses every
// inventory without cn0 (ErrMissingServer) for good, and with cn0 kept
// it counts offline in every plan for good. Expected: an abandoned
// server's reboot-command record does not keep the executor from
// starting without it (as for an abandoned BMC power cycle), once its
// cut-off passed.
func TestReview38_AbandonedDeadSelfServerCannotLeaveInventory(t *testing.T) {
	w, ids, self := newOwnWorld(t, 2, 1, 3)
	w.f.opts.ShutdownMax = 6 * time.Minute
	sent := false
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "reboot-self" && !sent {
			sent = true
			w.bmcs[self].p.OutOfBandOff() // lands, and the machine never comes back
		}
		return nil
	}
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 300 && !sent; i++ {
		w.tickRaw(ids, time.Second)
	}
	require.True(t, sent, "cn0's reboot command ran")
	// The executor moves to another machine (cn0 is gone): --self none.
	_ = w.f.Close()
	w.self = ""
	w.open()
	for range 30 {
		w.tickRaw(ids, time.Minute)
	}
	require.NoError(t, w.f.Abandon(self, w.plans[0], "by alice"))
	for range 20 {
		w.tickRaw(ids, time.Minute)
	}
	_ = w.f.Close()
	w.removed = self
	err := w.tryOpen()
	if err == nil {
		return
	}
	require.NotErrorIs(t, err, ErrMissingServer,
		"cn0, abandoned, off for good since its reboot command ran about 50m ago (far past ShutdownMax), cannot be taken out of the inventory")
}

// TestReview38_CrashBeforeSelfCommandFreezesFleetForJobTimeout (review 38
// round 5): the executor is killed after recording cn0's (its own) reboot
// command (SelfRebootBoot) and before running it, then restarted on the
// same boot. The engineer's account: it "leaves the server counted down
// for ShutdownMax". In fact the job, in self_rebooting with "sent on this
// boot" recorded, waits for a new boot for the whole job timeout, and
// while it does mayPowerOff refuses every power-off of the fleet ("this
// executor's own server is rebooting"), though no reboot can land later
// than ShutdownMax after the restart (the cut-off the record itself
// uses). Ground truth: no other server (concurrency 2: cn1's job started,
// drained, then cn2's) is powered off before cn0's job times out (10
// min), not within ShutdownMax (~2 min) of the restart; cn1 sits drained
// all that time and its reboot fails on the plan's job timeout. Expected: once the record's cut-off
// has passed and the same boot is read, nothing of the self reboot holds
// the other servers' power-offs any more (the job may wait, the fleet
// need not).
func TestReview38_CrashBeforeSelfCommandFreezesFleetForJobTimeout(t *testing.T) {
	w, ids, self := newOwnWorld(t, 3, 2, 3)
	crashed := w.crashAt("self reboot "+self, false)
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 600 && !crashed(); i++ {
		w.tickRaw(ids, time.Second)
	}
	require.True(t, crashed(), "killed between recording cn0's reboot command and running it")
	_ = w.f.Close()
	w.open() // same machine, same boot: the command never ran
	restart := w.clk.Real()
	bound := restart.Add(w.f.opts.ShutdownMax + time.Minute)
	firstOff := func(id string) time.Time {
		for _, tc := range w.bmcs[id].p.Truth() {
			if !tc.On && tc.At.After(restart) {
				return tc.At
			}
		}
		return time.Time{}
	}
	var off2 time.Time
	for end := restart.Add(15 * time.Minute); w.clk.Real().Before(end) && off2.IsZero(); {
		w.tickRaw(ids, time.Second)
		off2 = firstOff(ids[2])
		if off2.IsZero() {
			off2 = firstOff(ids[1])
		}
	}
	if off2.IsZero() || off2.After(bound) {
		t.Fatalf("after a restart at %s (cn0's reboot command never ran), no other server was powered off until %v (ShutdownMax %s, job timeout %s): the whole fleet waited for cn0's job\n%s",
			restart, off2, w.f.opts.ShutdownMax, w.cfg.JobTimeout, w.planTable())
	}
}
