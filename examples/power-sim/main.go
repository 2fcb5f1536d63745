// Command power-sim power-cycles a few simulated servers with the fake
// power controller: soft off where the OS obeys, hard off where it ignores
// the request, then power on. It needs no hardware and runs on a simulated
// clock.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

func main() {
	n := flag.Int("servers", 3, "number of simulated servers")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	servers := make([]*fake.Power, n)
	wentOff := make([]bool, n)
	for i := range servers {
		servers[i] = fake.NewPower(clk.Now, fake.PowerConfig{
			Lag:        5 * time.Second,
			SoftDelay:  20 * time.Second,
			IgnoreSoft: i%2 == 1,
		})
		if err := servers[i].Off(ctx, power.ModeSoft); err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
	}
	for tick := 0; tick <= 12; tick++ {
		line := fmt.Sprintf("t=%-4s", clk.Now().Sub(fake.Epoch))
		for i, p := range servers {
			s, err := p.State(ctx)
			if err != nil {
				return fmt.Errorf("server %d: %w", i, err)
			}
			line += fmt.Sprintf("  server-%d=%-13s", i, s)
			switch {
			case s == power.StateOn && !wentOff[i] && tick == 6:
				_ = p.Off(ctx, power.ModeHard) // soft shutdown timed out: escalate
			case s == power.StateOff:
				wentOff[i] = true
				_ = p.On(ctx)
			}
		}
		fmt.Println(line)
		clk.Advance(5 * time.Second)
	}
	for i, p := range servers {
		fmt.Printf("server-%d: %d power cycle(s), %d calls\n", i, p.Cycles(), len(p.Calls()))
	}
	return nil
}
