package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

type toggler interface{ TogglesOff(power.Mode) bool }

// Review 36: the Pool's controller passes on its adapter's TogglesOff
// (reboot.Toggler), and says true while the adapter is not connected.
func TestPoolControllerForwardsTogglesOff(t *testing.T) {
	clk := fake.NewClock(time.Time{})
	for _, tc := range []struct {
		name       string
		pc         fake.PowerConfig
		soft, hard bool
	}{
		{"button-soft", fake.PowerConfig{Button: fake.ButtonSoft}, true, false},
		{"no-button", fake.PowerConfig{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pw := fake.NewPower(clk.Real, tc.pc)
			pool := power.NewPool(power.PoolConfig{Now: clk.Real, IdleTimeout: time.Hour})
			t.Cleanup(func() { _ = pool.Close() })
			ctl := pool.Controller("h", power.Target{BMC: "bmc-h", Config: "v1",
				Connect: func(context.Context) (power.Controller, error) { return pw, nil }})
			tg, ok := ctl.(toggler)
			require.True(t, ok, "the Pool's controller implements reboot.Toggler")
			require.True(t, tg.TogglesOff(power.ModeSoft), "not connected: assumed a press")
			require.True(t, tg.TogglesOff(power.ModeHard), "not connected: assumed a press")
			_, err := ctl.State(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.soft, tg.TogglesOff(power.ModeSoft))
			require.Equal(t, tc.hard, tg.TogglesOff(power.ModeHard))
		})
	}
}
