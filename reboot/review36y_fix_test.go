package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36yFix_DeadBMCBackoffEndsWhenItAnswers: the back-off of a
// fence pending on a dead BMC (deadBackoff) never delays the try after
// the BMC answers again: dead for 40 minutes (the back-off grown to
// minutes), it answers again, and the ForceOff goes out within RetryDelay
// + PollInterval, the host off (ground truth) and the fence answered.
func TestReview36yFix_DeadBMCBackoffEndsWhenItAnswers(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	var dead atomic.Bool
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if dead.Load() {
			return fake.Fault{Kind: fake.FaultTimeout}
		}
		return fake.Fault{}
	}})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	review36uLoop(t, rec, clk, clk.Real().Add(10*time.Minute), clk.Real())
	dead.Store(true)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(40*time.Minute), at)
	offs := review36xCount(pw, fake.OpOff, at)
	require.LessOrEqual(t, offs, 10, "the setup: the power-offs on the dead BMC back off: %d in 40 min", offs)
	require.True(t, pw.HardwareOn(), "the setup: no call reached the dead BMC")
	dead.Store(false)
	back := clk.Real()
	// Requeues followed as asked (review36uLoop looks at least every 30 s).
	for clk.Real().Before(back.Add(cfg.RetryDelay + cfg.PollInterval)) {
		res, err := rec.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(max(res.RequeueAfter, time.Second))
	}
	require.False(t, pw.HardwareOn(),
		"the BMC answers again after 40 min dead: the fence's ForceOff must go out within RetryDelay + PollInterval (power-offs since %d); truth %s",
		review36xCount(pw, fake.OpOff, back), rebootcheck.DescribeTruth(pw))
	review36uLoop(t, rec, clk, clk.Real().Add(2*time.Minute), back)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.Covers(), "the fence is answered once the BMC answers; status %+v", h.Status)
}
