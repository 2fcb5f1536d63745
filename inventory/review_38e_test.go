package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReview38_AbandonedSelfRebootStillLands (review 38 round 4): cn0
// runs the executor (Self); its reboot command is a delayed one
// (`shutdown -r +1`, as issue 38 A.3 names: it returns at once, the reboot
// comes a minute later). The plan (concurrency 1) starts cn0's job,
// which runs the command and waits for a new boot ID. The operator
// abandons cn0 while it waits. The job ends failed and the fleet keeps
// nothing of it: cn0 does not count as down (no AbandonedCycle: only a
// BMC power-off is taken for one that "may still land"), its slot is
// free, and "self last, alone" (mayPowerOff refuses power-offs only while
// the self job is in JobSelfReboot) no longer holds. The plan powers off
// cn1 at once; the reboot already sent then takes cn0 (and the executor)
// down while cn1 is off. Ground truth: two servers offline at once at
// concurrency 1, and the executor reboots itself while a server it
// powered off waits for it. Expected: an abandon stops the fleet's
// follow-up, not a reboot command already sent: until the new boot is
// seen (or a bound such as ShutdownMax after the command passes), cn0
// counts as down and nothing else is powered off (as for a BMC power-off
// that may still land: AbandonedCycle).
func TestReview38_AbandonedSelfRebootStillLands(t *testing.T) {
	w, ids, self := newOwnWorld(t, 3, 1, 3)
	ran := w.selfRebootCmd(nil) // shutdown -r +1: scheduled, returns at once
	sentAt := w.runPlanUntilSelfCmd(ids, ran)
	require.False(t, sentAt.IsZero(), "cn0's reboot command ran")
	lands := sentAt.Add(time.Minute)
	require.Less(t, time.Minute, w.f.opts.ShutdownMax, "the delayed reboot lands within ShutdownMax of its command")
	w.run(ids, 10*time.Second)
	require.NoError(t, w.f.Abandon(self, w.plans[0], "by alice"))
	// The scheduled reboot: cn0 (and the executor) go down for a while.
	r := lateOSReboot{server: self, at: lands}
	for w.clk.Real().Before(lands.Add(time.Minute)) {
		w.run(ids, time.Second)
		r.play(w)
		if n := maxOff(w.bmcs); n > w.conc {
			t.Fatalf("%d servers off at once, concurrency %d: cn0's reboot, sent before the abandon, landed while the plan had powered off another server in its slot\n%s",
				n, w.conc, w.planTable())
		}
	}
	if id, at, ok := w.firstOffIn(ids[1:], sentAt, lands); ok {
		t.Fatalf("%s powered off at %s, while the executor's own reboot (sent at %s) was still to come (self last, alone)", id, at, sentAt)
	}
}

// TestReview38_TimedOutSelfRebootLandsAfterGrace (review 38 round 4):
// the executor's own reboot command times out (a `systemctl reboot` that
// hangs while the OS starts shutting down: it may have been accepted, as
// a BMC power-off that timed out may). Two minutes later the same boot ID
// is read (selfRebootGrace), the job fails and frees its slot, and the
// plan powers off cn1 at once; the reboot lands three minutes after the
// command, within ShutdownMax (6 min, its default: twice a 3 min soft
// timeout), the bound this package gives for a power-off that was
// accepted late. Ground truth: two servers offline at once at
// concurrency 1. Expected: a reboot command that timed out counts as
// "may have been accepted" (cn0 counts as down, and nothing else is
// powered off) until ShutdownMax after it ran, as a timed-out BMC
// power-off does.
func TestReview38_TimedOutSelfRebootLandsAfterGrace(t *testing.T) {
	w, ids, self := newOwnWorld(t, 3, 1, 3)
	w.f.opts.ShutdownMax = 6 * time.Minute
	ran := w.selfRebootCmd(func() error {
		return context.DeadlineExceeded // timed out: it may still happen
	})
	sentAt := w.runPlanUntilSelfCmd(ids, ran)
	require.False(t, sentAt.IsZero(), "cn0's reboot command ran")
	lands := sentAt.Add(3 * time.Minute)
	r := lateOSReboot{server: self, at: lands}
	for w.clk.Real().Before(lands.Add(time.Minute)) {
		// (w.check would take cn0's own reboot, below, for a server
		// the fleet left off.)
		w.tick(ids)
		r.play(w)
	}
	if id, at, ok := w.firstOffIn(ids[1:], sentAt, lands); ok {
		t.Fatalf("%s powered off at %s, while the executor's own reboot (its command timed out at %s) could still land (it did at %s)\n%s",
			id, at, sentAt, lands, w.planTable())
	}
}
