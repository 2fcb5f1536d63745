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
	w, ids, self := newOwnWorld(t, 2, 1, 3)
	w.f.opts.ShutdownMax = 6 * time.Minute
	var held string
	ran := w.selfRebootCmd(func() error {
		w.clk.Advance(8 * time.Minute)
		held = w.f.mayPowerOff(w.ctx(), ids[1], hostRecord{})
		return context.DeadlineExceeded
	})
	returnedAt := w.runPlanUntilSelfCmd(ids, ran)
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
