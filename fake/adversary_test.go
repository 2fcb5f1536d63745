package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"pgregory.net/rapid"
)

// TestLiesAreBounded checks the adversary Power against its own
// documentation, in every drawn reporting mode: a read reports unknown, or
// a state the hardware honestly showed at some instant of [t-Stale, t]
// (Transitioning replaced by the state before it when NoTransitioning);
// and the ground truth agrees with the honest timeline (on while it shows
// On, off while it shows Off but for Report.EarlyOff after a power-off),
// whatever the commands, faults and out-of-band events.
func TestLiesAreBounded(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := fake.DrawPowerConfig(t, "power")
		p := fake.NewPower(clk.Real, cfg)
		type sample struct {
			at time.Time
			s  power.State
		}
		var honest []sample // the honest state after every step
		record := func() { honest = append(honest, sample{clk.Real(), p.Current()}) }
		record()
		for i := 0; i < rapid.IntRange(1, 60).Draw(t, "steps"); i++ {
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0:
				_ = p.On(ctx)
			case 1:
				_ = p.Off(ctx, power.Mode(rapid.IntRange(0, 1).Draw(t, "mode")))
			case 2:
				clk.Apply(fake.DrawClockMove(t, "clock", true))
			case 3:
				if rapid.Bool().Draw(t, "on") {
					p.OutOfBandOn()
				} else {
					p.OutOfBandOff()
				}
			case 4:
				p.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy, Applied: rapid.Bool().Draw(t, "applied")})
			default:
				got, err := p.State(ctx)
				if err != nil || got == power.StateUnknown {
					break
				}
				now := clk.Real()
				ok := false
				for j := len(honest) - 1; j >= 0; j-- {
					h := honest[j]
					// The honest state h.s held from h.at until the next sample.
					next := now
					if j+1 < len(honest) {
						next = honest[j+1].at
					}
					inWindow := !next.Before(now.Add(-cfg.Report.Stale)) || j == len(honest)-1
					if inWindow && (h.s == got || cfg.Report.NoTransitioning && h.s == power.StateTransitioning) {
						ok = true
						break
					}
					if h.at.Before(now.Add(-cfg.Report.Stale)) {
						break
					}
				}
				if !ok {
					t.Fatalf("read %v at %v: no honest state like it within %v", got, now, cfg.Report.Stale)
				}
			}
			record()
			// Ground truth agrees with the honest reading.
			switch p.Current() {
			case power.StateOn:
				if !p.HardwareOn() {
					t.Fatalf("honest On, truth off")
				}
			case power.StateOff:
				if p.HardwareOn() {
					// Only in the early Off of a commanded power-off.
					tr := p.Transitions()
					last := tr[len(tr)-1]
					if last.To != power.StateOff || clk.Real().Sub(last.At) >= cfg.Report.EarlyOff {
						t.Fatalf("honest Off, truth on (early Off %v)", cfg.Report.EarlyOff)
					}
				}
			}
		}
	})
}
