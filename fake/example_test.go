package fake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// A soft shutdown that the operating system ignores, then a hard one, on a
// clock that only moves when the test says so.
func ExamplePower() {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Real, fake.PowerConfig{Lag: 2 * time.Second, IgnoreSoft: true})

	_ = p.Off(ctx, power.ModeSoft)
	clk.Advance(3 * time.Minute)
	s, _ := p.State(ctx)
	fmt.Println("after soft off:", s)

	p.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	err := p.Off(ctx, power.ModeHard)
	fmt.Println("first hard off:", power.Classify(err))

	_ = p.Off(ctx, power.ModeHard)
	s, _ = p.State(ctx)
	fmt.Println("right after hard off:", s)
	clk.Advance(2 * time.Second)
	s, _ = p.State(ctx)
	fmt.Println("two seconds later:", s)

	for _, c := range p.Calls() {
		fmt.Printf("%d %s %s err=%v\n", c.Seq, c.At.Sub(fake.Epoch), c.Op, c.Err != nil)
	}
	// Output:
	// after soft off: on
	// first hard off: busy
	// right after hard off: transitioning
	// two seconds later: off
	// 1 0s off err=false
	// 2 3m0s state err=false
	// 3 3m0s off err=true
	// 4 3m0s off err=false
	// 5 3m0s state err=false
	// 6 3m2s state err=false
}
