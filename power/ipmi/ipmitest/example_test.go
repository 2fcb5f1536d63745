package ipmitest_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// The IPMI adapter powers a host off through the emulator; the fake.Power
// underneath tells what really happened.
func ExampleBMC() {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: "admin", Password: "example-only"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bmc.Close()

	ctx := context.Background()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: bmc.Host(), Port: bmc.Port(), Username: "admin", Password: "example-only"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println(c.Off(ctx, power.ModeHard))
	fmt.Println("hardware on:", hw.HardwareOn(), "power-down received:", slices.Contains(bmc.Commands(), ipmitest.PowerDown), "logins:", bmc.Logins())
	// Output:
	// <nil>
	// hardware on: false power-down received: true logins: 1
}
