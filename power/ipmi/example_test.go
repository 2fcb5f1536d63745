package ipmi_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// Power-cycle a server over IPMI; here the BMC is the emulator on loopback
// UDP.
func ExampleConnect() {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: "admin", Password: "example-password"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bmc.Close()

	ctx := context.Background()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: bmc.Host(), Port: bmc.Port(), Username: "admin", Password: "example-password"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_ = c.Off(ctx, power.ModeHard)
	s, _ := c.State(ctx)
	fmt.Println("after off:", s)
	_ = c.On(ctx)
	s, _ = c.State(ctx)
	fmt.Println("after on:", s)
	fmt.Println("chassis commands:", bmc.Commands())
	// Output:
	// after off: off
	// after on: on
	// chassis commands: [power-down status status power-up status]
}
