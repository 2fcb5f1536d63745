package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// Review 36: the lease guard's controller passes on reboot.Toggler, and
// its refusal for leadership counts as a call not tried (soft stays soft).
func TestReview36_GuardedTogglesAndNotLeaderNotTried(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonSoft})
	g := &LeaseGuard{Monotonic: clk.Monotonic} // never renewed: not the leader
	pc := g.Wrap(pw)
	tg, ok := pc.(reboot.Toggler)
	require.True(t, ok, "the guarded controller implements reboot.Toggler")
	require.True(t, tg.TogglesOff(power.ModeSoft))
	require.False(t, tg.TogglesOff(power.ModeHard))
	require.False(t, g.Wrap(fake.NewPower(clk.Real, fake.PowerConfig{})).(reboot.Toggler).TogglesOff(power.ModeSoft))
	err := pc.Off(context.Background(), power.ModeSoft)
	require.ErrorIs(t, err, ErrNotLeader)
	require.ErrorIs(t, err, reboot.ErrNotLeader)
	require.Equal(t, power.ClassBusy, reboot.CallClass(err), "not tried")
}
