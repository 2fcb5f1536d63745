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

// phasedBMC reads as plain until stage 1, as flapping in stage 1 and as
// null in stage 2 and after.
type phasedBMC struct {
	*fake.Power
	flapping, null power.Controller
	stage          *atomic.Int32
}

func (p phasedBMC) State(ctx context.Context) (power.State, error) {
	switch p.stage.Load() {
	case 0:
		return p.Power.State(ctx)
	case 1:
		return p.flapping.State(ctx)
	}
	return p.null.State(ctx)
}

// TestReview36aaFix_FlappedThenPoweredOnRestartsEveryThreeMinutes: the
// safety side of TestReview36aa_RestartEarlyInLongerFlappingNullFalseHoldBroken's
// fix. A fenced host whose BMC flapped (null 150 s, Off 20 s: the
// persisted run is marked interrupted, Status.UnsureInterrupted) is
// then powered on by someone else, its BMC answering null from then on,
// and the controller restarts every 3 minutes: a restarted controller
// does not count from the interrupted value, but writes its own run anew
// once it has read half of SoftTimeout + StaleReads of it, and the next
// one counts from that: the host is powered off again and HoldBroken
// recorded, as with a BMC that never flapped
// (TestReview36wFix_HeldHostOnNullRestartsEveryThreeMinutes).
func TestReview36aaFix_FlappedThenPoweredOnRestartsEveryThreeMinutes(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{})
	var stage atomic.Int32
	w.Power = phasedBMC{pw, nullMostOfPeriod{pw, clk, 170 * time.Second, 20 * time.Second}, nullAlways{pw}, &stage}
	rec := w.newRec()
	client := &reboot.Client{Hosts: store, Key: "fence", Now: clk.Now}
	review36uLoop(t, rec, clk, clk.Real().Add(time.Minute), clk.Real())
	tk, err := client.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	review36uLoop(t, rec, clk, clk.Real().Add(5*time.Minute), clk.Real())
	fenced, err := client.Fenced(ctx, tk)
	require.NoError(t, err)
	require.True(t, fenced && !pw.HardwareOn(), "the setup: the fence was carried out; truth %s", rebootcheck.DescribeTruth(pw))
	stage.Store(1)
	review36uLoop(t, rec, clk, clk.Real().Add(15*time.Minute), clk.Real())
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, h.Status.UnsureInterrupted && !h.Status.UnsureSince.IsZero() && h.Status.HoldBroken.IsZero(),
		"the setup: the persisted run is marked interrupted, no HoldBroken; status %+v", h.Status)
	stage.Store(2)
	pw.OutOfBandOn()
	at := clk.Real()
	end := at.Add(30 * time.Minute)
	for clk.Real().Before(end) {
		rec = w.newRec()
		review36uLoop(t, rec, clk, clk.Real().Add(3*time.Minute), at)
	}
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.True(t, pw.WasOffDuring(at.Add(time.Second), at.Add(10*time.Minute)),
		"a held host powered on by someone else after its BMC flapped, the BMC null from then on, the controller restarted every 3 minutes: not powered off again within 10 min; status %+v; truth %s",
		h.Status, rebootcheck.DescribeTruth(pw))
	broken, err := client.HoldBroken(ctx, tk)
	require.NoError(t, err)
	require.False(t, broken.IsZero(), "HoldBroken not reported; status %+v", h.Status)
}
