package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
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
	w, ids := newWorld(t, 3, 1)
	w.budget = 3
	self := ids[0]
	w.inv.Servers[0].Reboot = []string{"reboot-self", self}
	w.self = self
	w.open()
	defer func() { w.close() }()
	w.f.opts.ShutdownMax = 6 * time.Minute
	w.boot[self] = "boot-a"
	var returnedAt time.Time
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "reboot-self" && returnedAt.IsZero() {
			w.clk.Advance(8 * time.Minute) // hangs, then is killed: it may have been accepted
			returnedAt = w.clk.Real()
			return context.DeadlineExceeded
		}
		return nil
	}
	w.clk.Advance(time.Minute)
	w.newPlan()
	for i := 0; i < 300 && returnedAt.IsZero(); i++ {
		w.run(ids, time.Second)
	}
	require.False(t, returnedAt.IsZero(), "cn0's reboot command ran")
	lands := returnedAt.Add(time.Minute)
	landed := false
	for w.clk.Real().Before(lands.Add(time.Minute)) {
		w.pass()
		for _, id := range ids {
			w.step(id)
		}
		w.clk.Advance(time.Second)
		if !landed && !w.clk.Real().Before(lands) {
			landed = true
			w.bmcs[self].p.OutOfBandOff()
			w.boot[self] = "boot-b"
		}
		if landed && w.clk.Real().After(lands.Add(20*time.Second)) && !w.bmcs[self].p.HardwareOn() {
			w.bmcs[self].p.OutOfBandOn()
		}
		if n := maxOff(w.bmcs); n > w.conc {
			p, _ := w.store.Get(w.ctx(), w.plans[0])
			t.Fatalf("%d servers off at once at %s, concurrency %d: cn0's reboot (its command hung until %s) landed while the plan had powered off another server\n%s",
				n, w.clk.Real(), w.conc, returnedAt, plan.Table(p))
		}
	}
	for _, id := range ids[1:] {
		for _, tc := range w.bmcs[id].p.Truth() {
			if !tc.On && tc.At.After(returnedAt.Add(-time.Second)) && tc.At.Before(lands) {
				p, _ := w.store.Get(w.ctx(), w.plans[0])
				t.Fatalf("%s powered off at %s, while the executor's own reboot (its command hung until %s and timed out) could still land (it did at %s)\n%s",
					id, tc.At, returnedAt, lands, plan.Table(p))
			}
		}
	}
}
