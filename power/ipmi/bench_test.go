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
