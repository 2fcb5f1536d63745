package redfish_test

import (
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"pgregory.net/rapid"
)

// TestAdapterMatchesEmulator drives the adapter and the emulated BMC with
// random operations, clock moves and faults (refused resets, resets that
// are refused but applied, busy-while-transitioning, expiring sessions),
// and checks after every step that the state the adapter reports is the
// emulator's, and that every error is classified.
func TestAdapterMatchesEmulator(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		q := fake.BMCQuirks{
			NoGraceful:             rapid.Bool().Draw(t, "noGraceful"),
			Lowercase:              rapid.Bool().Draw(t, "lowercase"),
			ActionInfo:             rapid.Bool().Draw(t, "actionInfo"),
			BusyWhileTransitioning: rapid.Bool().Draw(t, "busyTransitioning"),
			SessionRequests:        rapid.SampledFrom([]int{0, 6, 7, 9}).Draw(t, "sessionRequests"),
		}
		r := newRig(t, q, fake.PowerConfig{Lag: time.Duration(rapid.IntRange(0, 5).Draw(t, "lag")) * time.Second,
			SoftDelay: time.Duration(rapid.IntRange(0, 20).Draw(t, "softDelay")) * time.Second})
		c := r.connect(t)
		for i := 0; i < rapid.IntRange(1, 40).Draw(t, "steps"); i++ {
			var err error
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				err = c.On(ctx)
			case 1:
				err = c.Off(ctx, power.ModeSoft)
			case 2:
				err = c.Off(ctx, power.ModeHard)
			case 3:
				r.clk.Advance(time.Duration(rapid.IntRange(1, 30).Draw(t, "dt")) * time.Second)
			case 4:
				r.bmc.FailNextReset(rapid.SampledFrom([]int{400, 405, 409, 500, 501, 503}).Draw(t, "status"),
					rapid.Bool().Draw(t, "applied"))
			case 5:
				_, err = c.State(ctx)
			}
			if err != nil && power.Classify(err) == power.ClassNone {
				t.Fatalf("unclassified error %v", err)
			}
			got, err := c.State(ctx)
			if err != nil {
				t.Fatalf("state: %v", err)
			}
			if want := r.hw.Current(); got != want {
				t.Fatalf("adapter reports %v, emulator is %v", got, want)
			}
		}
	})
}
