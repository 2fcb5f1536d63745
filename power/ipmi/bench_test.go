package ipmi_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
)

// BenchmarkOperations measures each operation against the emulated BMC on
// loopback: latency (ns/op) and round trips (UDP requests the BMC
// received per operation).
func BenchmarkOperations(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		op   func(*ipmi.Controller) error
	}{
		{"connect+close", nil},
		{"state", func(c *ipmi.Controller) error { _, err := c.State(ctx); return err }},
		{"off-hard+on", func(c *ipmi.Controller) error {
			if err := c.Off(ctx, power.ModeHard); err != nil {
				return err
			}
			return c.On(ctx)
		}},
		{"on-already-on", func(c *ipmi.Controller) error { return c.On(ctx) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bmc, _ := newBMC(b, fake.PowerConfig{})
			cfg := ipmi.Config{Host: bmc.Host(), Port: bmc.Port(), Username: user, Password: pass, Timeout: time.Second}
			var c *ipmi.Controller
			if bc.op != nil {
				var err error
				if c, err = ipmi.Connect(ctx, cfg); err != nil {
					b.Fatal(err)
				}
				defer c.Close()
			}
			start := bmc.Packets()
			for b.Loop() {
				if bc.op == nil {
					c, err := ipmi.Connect(ctx, cfg)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Close(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err := bc.op(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(bmc.Packets()-start)/float64(b.N), "round-trips/op")
		})
	}
}

// TestDatagramsPerOperation counts, at the BMC (ground truth), the
// datagrams each operation costs on a live session: a read 1 (Get Chassis
// Status), a power-on or soft power-off 2 (read, Chassis Control), a hard
// power-off 1 (Chassis Control, sent whatever the state reads), and 1 when
// the read finds the host already in the state asked.
func TestDatagramsPerOperation(t *testing.T) {
	ctx := context.Background()
	b, hw := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	for _, tc := range []struct {
		name string
		op   func() error
		want int
	}{
		{"state", func() error { _, err := c.State(ctx); return err }, 1},
		{"off soft, host on", func() error { return c.Off(ctx, power.ModeSoft) }, 2},
		{"on, host off", func() error { return c.On(ctx) }, 2},
		{"on, host on", func() error { return c.On(ctx) }, 1},
		{"off hard", func() error { return c.Off(ctx, power.ModeHard) }, 1},
		{"off soft, host off", func() error { return c.Off(ctx, power.ModeSoft) }, 1},
	} {
		before := b.Packets()
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := b.Packets() - before; got != tc.want {
			t.Errorf("%s: %d datagrams, want %d", tc.name, got, tc.want)
		}
		t.Logf("%s: %d datagram(s); hardware on: %v", tc.name, b.Packets()-before, hw.HardwareOn())
	}
}
