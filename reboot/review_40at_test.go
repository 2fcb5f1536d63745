package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40at_LostPowerOnLandsAfterFreshOffForgottenHostRunsUnderOnlineFalse:
// 75e4656 makes idle record an Online=false host read Off by a freshOff
// reading (OfflineSince zero) as "Online=false and known off", and makes
// statusBusy drop the "power-on decided and not yet confirmed" rule under
// Online=false once the host is known off. But freshOff only asks that no
// call of ours was made for StaleReads (QuietFor) and that the host reads
// Off: it does not wait for a power-on whose answer was lost, which the
// BMC may still carry out later (a timeout, Applied late: fake.Fault
// Late, within LostLanding), and busy's callsMayLand only counts lost
// power-offs and presses. So: Online=true, off; the power-on's answer is
// lost (it lands 120 s later, within LostLanding = SoftTimeout = 180 s);
// the operator sets Online=false a second later; 30 s on the host reads
// Off fresh and is recorded known off; the host is dropped from the
// inventory: not busy, forgotten at the next tick; then the lost power-on
// lands and the host runs under Online=false with no watch, for ever.
// Before 75e4656 the unconfirmed power-on kept it busy. Ground truth:
// fake.Power on, Online=false, the key forgotten.
func TestReview40at_LostPowerOnLandsAfterFreshOffForgottenHostRunsUnderOnlineFalse(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	cfg := reboot.DefaultConfig()
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Initial: power.StateOff})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	rec := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg,
		Power: func(string) (power.Controller, error) { return pw, nil }}
	start := clk.Real()
	// The power-on's answer is lost; the BMC carries it out 120 s later.
	pw.FailNext(fake.OpOn, fake.Fault{Kind: fake.FaultTimeout, Applied: true, Late: 120 * time.Second})
	for i := 0; ; i++ {
		require.Less(t, i, 600, "setup: Online and off: a power-on within 10 min")
		res, err := rec.Reconcile(ctx, "h")
		t.Logf("%v %v %q perr=%v err=%v", clk.Real().Sub(start), res.Decision.Power, res.Decision.Reason, res.PowerErr, err)
		if res.Decision.Power == reboot.ActionPowerOn {
			break
		}
		clk.Advance(time.Second)
	}
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Online = false }))
	loop40aq(t, rec, clk, clk.Real().Add(40*time.Second), start)
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	t.Logf("after 40 s of Online=false: status %+v; truth %s", h.Status, rebootcheck.DescribeTruth(pw))
	require.False(t, pw.HardwareOn(), "setup: the lost power-on has not landed yet")

	// Dropped from the inventory (the same process holds the key).
	held, last := runLoop40as(t, rec.Loop(func(context.Context) ([]string, error) { return nil, nil }), clk, 10*time.Minute)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	if !held && pw.HardwareOn() && !h.Online {
		t.Fatalf("an Online=false host whose power-on (answer lost) landed 120 s after it was sent (within LostLanding) runs under Online=false and its key was forgotten: nobody powers it off again (last Next %+v; status %+v; truth %s)",
			last, h.Status, rebootcheck.DescribeTruth(pw))
	}
}
