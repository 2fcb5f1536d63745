package inventory

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSelfRebootCommandHangingHoldsEveryPowerOff (issue 38, review round
// 5, finding 1): while the executor's own reboot command runs (hanging
// longer than ShutdownMax, under the command timeout), its cut-off is
// not known: every other power-off stays held, whatever the time since
// the command began; once it returns, the host record's SelfRebootAt and
// the job's RebootSentAt say when it returned, not when it began.
func TestSelfRebootCommandHangingHoldsEveryPowerOff(t *testing.T) {
	w, ids := newWorld(t, 2, 1)
	w.budget = 3
	self := ids[0]
	w.inv.Servers[0].Reboot = []string{"reboot-self", self}
	w.self = self
	w.open()
	defer func() { w.close() }()
	w.f.opts.ShutdownMax = 6 * time.Minute
	w.boot[self] = "boot-a"
	var returnedAt time.Time
	var held string
	w.f.opts.command = func(_ context.Context, argv []string) error {
		if argv[0] == "reboot-self" && returnedAt.IsZero() {
			w.clk.Advance(8 * time.Minute)
			held = w.f.mayPowerOff(w.ctx(), ids[1], hostRecord{})
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
	require.True(t, strings.Contains(held, "own server"),
		"8 minutes into cn0's reboot command (ShutdownMax 6m), another server's power-off was not held for it: %q", held)
	h, err := w.f.hosts.load(self)
	require.NoError(t, err)
	require.Equal(t, returnedAt, h.SelfRebootAt.UTC(), "SelfRebootAt is when the command returned")
	j, ok, err := w.f.job(w.f.lastJob[self])
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, j.RebootSentAt)
	require.Equal(t, returnedAt, j.RebootSentAt.UTC(), "RebootSentAt is when the command returned")
	require.Contains(t, j.RebootError, "deadline exceeded")
}
