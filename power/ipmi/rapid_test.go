package ipmi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"pgregory.net/rapid"
)

// TestAdapterMatchesEmulator drives the adapter against the emulated IPMI
// BMC with random operations, clock moves, completion codes (refused, and
// refused but applied), BMC resets that drop the session, and out-of-band
// power changes, in every reporting mode of the adversary fakes (stale,
// flapping, unknown, never transitioning), and checks after every step:
//   - ground truth: the hardware was powered on by a command only while the
//     caller asked for On (IPMI has no toggle; no exemption is needed);
//   - a soft shutdown is only ever sent after a read that said on;
//   - every error is classified;
//   - the state the adapter reports is the state the BMC reported: on for
//     on, off for off, unknown (with an error) when the BMC could not tell
//     or answered with a completion code, never a guess.
func TestAdapterMatchesEmulator(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		clk := fake.NewClock(time.Time{})
		cfg := fake.PowerConfig{Lag: time.Duration(rapid.Int64Range(0, int64(5*time.Second)).Draw(t, "lag")),
			SoftDelay:  time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "softDelay")),
			IgnoreSoft: rapid.Bool().Draw(t, "ignoreSoft"),
			Initial:    rapid.SampledFrom([]power.State{power.StateOn, power.StateOff}).Draw(t, "initial")}
		if !rapid.Bool().Draw(t, "honest") {
			cfg.Report = fake.DrawReport(t, "report")
		}
		hw := fake.NewPower(clk.Now, cfg)
		b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		c, err := ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass, Timeout: 100 * time.Millisecond, Retries: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		onsByCommand := func() int {
			n := 0
			for _, tc := range hw.Truth() {
				if tc.On && tc.Cause == fake.CauseCommand {
					n++
				}
			}
			return n
		}
		stateCalls := func() []fake.Call {
			var out []fake.Call
			for _, call := range hw.Calls() {
				if call.Op == fake.OpState {
					out = append(out, call)
				}
			}
			return out
		}
		cmds := []string{ipmitest.Status, ipmitest.PowerUp, ipmitest.PowerDown, ipmitest.SoftOff}
		for i := 0; i < rapid.IntRange(1, 30).Draw(t, "steps"); i++ {
			before := onsByCommand()
			var err error
			op := rapid.IntRange(0, 8).Draw(t, "op")
			switch op {
			case 0:
				err = c.On(ctx)
			case 1:
				err = c.Off(ctx, power.ModeSoft)
			case 2:
				err = c.Off(ctx, power.ModeHard)
			case 3:
				clk.Apply(fake.DrawClockMove(t, "dt", false))
			case 4:
				b.FailNext(rapid.SampledFrom(cmds).Draw(t, "failCmd"),
					rapid.SampledFrom([]uint8{0xC0, 0xC1, 0xC3, 0xC9, 0xCE, 0xD4, 0xD5, 0xFF}).Draw(t, "cc"), rapid.Bool().Draw(t, "applied"))
			case 5:
				clk.Advance(time.Duration(rapid.IntRange(1, 30).Draw(t, "advance")) * time.Second)
			case 6:
				if rapid.Bool().Draw(t, "oobOn") {
					hw.OutOfBandOn()
				} else {
					hw.OutOfBandOff()
				}
				before = onsByCommand()
			case 7:
				if rapid.IntRange(0, 3).Draw(t, "reset") == 0 {
					if err := b.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			case 8:
				_, err = c.State(ctx)
			}
			if op != 0 && onsByCommand() > before {
				t.Fatalf("operation %d powered the hardware on (truth %v, commands %v)", op, hw.Truth(), b.Commands())
			}
			if err != nil && power.Classify(err) == power.ClassNone {
				t.Fatalf("unclassified error %v", err)
			}
			// A soft shutdown follows a status read that said on.
			seen := b.Commands()
			for k, cmd := range seen {
				if cmd == ipmitest.SoftOff && (k == 0 || seen[k-1] != ipmitest.Status) {
					t.Fatalf("soft shutdown without a fresh read first: %v", seen)
				}
			}
			n := len(stateCalls())
			got, err := c.State(ctx)
			calls := stateCalls()
			if len(calls) == n {
				// The BMC answered with a completion code before reading.
				if got != power.StateUnknown || err == nil {
					t.Fatalf("completion code read as %v, %v", got, err)
				}
				continue
			}
			// A request retransmitted under load (go-ipmi resends after its
			// timeout) makes the BMC read more than once; the adapter
			// reports the answer to one of them.
			ok, last := false, ""
			for _, call := range calls[n:] {
				reported := call.Reported
				var match bool
				switch reported {
				case power.StateOn, power.StateOff:
					match = got == reported && err == nil
				case power.StateUnknown:
					match = got == power.StateUnknown && power.Classify(err) == power.ClassBusy
				case power.StateTransitioning:
					match = got == power.StateOn || got == power.StateOff
				}
				ok = ok || match
				last = fmt.Sprintf("the BMC reported %v, the adapter %v (%v)", reported, got, err)
			}
			if !ok {
				t.Fatalf("%s (BMC reads during this call: %d)", last, len(calls)-n)
			}
		}
	})
}
