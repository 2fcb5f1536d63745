package redfish_test

import (
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"pgregory.net/rapid"
)

// TestAdapterMatchesEmulator drives the adapter and the emulated BMC with
// random operations, clock moves (any precision) and faults (refused
// resets, resets that are refused but applied, busy-while-transitioning,
// expiring sessions, out-of-band power changes), in every reporting mode
// of the adversary fakes (stale, flapping, unknown as null, missing or
// Paused, never transitioning), and checks against ground truth after every
// step:
//   - no reset the adapter posts powers the hardware on unless the caller
//     asked for On (a toggle on a host that is off is the bug this guards);
//   - every error is classified;
//   - with honest reporting, the adapter reports the emulator's state.
func TestAdapterMatchesEmulator(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		q := redfishtest.Quirks{
			NoGraceful:             rapid.Bool().Draw(t, "noGraceful"),
			Lowercase:              rapid.Bool().Draw(t, "lowercase"),
			ActionInfo:             rapid.Bool().Draw(t, "actionInfo"),
			BusyWhileTransitioning: rapid.Bool().Draw(t, "busyTransitioning"),
			SessionRequests:        rapid.SampledFrom([]int{0, 6, 7, 9}).Draw(t, "sessionRequests"),
		}
		cfg := fake.PowerConfig{Lag: time.Duration(rapid.Int64Range(0, int64(5*time.Second)).Draw(t, "lag")),
			SoftDelay: time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "softDelay")),
			Initial:   rapid.SampledFrom([]power.State{power.StateOn, power.StateOff}).Draw(t, "initial")}
		honest := rapid.Bool().Draw(t, "honest")
		if !honest {
			cfg.Report = fake.DrawReport(t, "report")
		}
		r := newRig(t, redfishtest.Quirks{}, cfg)
		r.bmc.Quirks = q
		c := r.connect(t)
		onsBy := func() int {
			n := 0
			for _, tc := range r.hw.Truth() {
				if tc.On && tc.Cause == fake.CauseCommand {
					n++
				}
			}
			return n
		}
		for i := 0; i < rapid.IntRange(1, 40).Draw(t, "steps"); i++ {
			var err error
			before := onsBy()
			op := rapid.IntRange(0, 7).Draw(t, "op")
			switch op {
			case 0:
				err = c.On(ctx)
			case 1:
				err = c.Off(ctx, power.ModeSoft)
			case 2:
				err = c.Off(ctx, power.ModeHard)
			case 3:
				r.clk.Apply(fake.DrawClockMove(t, "dt", false))
			case 4:
				r.bmc.FailNextReset(rapid.SampledFrom([]int{400, 405, 409, 500, 501, 503}).Draw(t, "status"),
					rapid.Bool().Draw(t, "applied"))
			case 5:
				_, err = c.State(ctx)
			case 6:
				r.clk.Advance(time.Duration(rapid.IntRange(1, 30).Draw(t, "dt")) * time.Second)
			case 7:
				if rapid.Bool().Draw(t, "oobOn") {
					r.hw.OutOfBandOn()
				} else {
					r.hw.OutOfBandOff()
				}
				before = onsBy()
			}
			oobNear := false
			for _, e := range r.hw.OutOfBandEvents() {
				oobNear = oobNear || !e.At.Before(r.clk.Real().Add(-fake.MaxStale))
			}
			// (A BMC echoing the state from before an out-of-band change
			// can fool any client: documented, not checked.)
			if op != 0 && onsBy() > before && !(oobNear && !honest) {
				t.Fatalf("operation %d powered the hardware on (truth %v, resets %v)", op, r.hw.Truth(), r.bmc.Resets())
			}
			if err != nil && power.Classify(err) == power.ClassNone {
				t.Fatalf("unclassified error %v", err)
			}
			got, err := c.State(ctx)
			if err != nil {
				t.Fatalf("state: %v", err)
			}
			if want := r.hw.Current(); honest && got != want {
				t.Fatalf("adapter reports %v, emulator is %v", got, want)
			}
		}
	})
}
