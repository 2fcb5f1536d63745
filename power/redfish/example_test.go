package redfish_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Power-cycle a server through Redfish; here the BMC is the emulator on a
// loopback TLS port, trusted through RootCAs.
func ExampleConnect() {
	clk := fake.NewClock(time.Time{})
	bmc := redfishtest.NewBMC(clk.Now, fake.NewPower(clk.Now, fake.PowerConfig{}), "admin", "example-password")
	srv := bmc.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, Username: "admin", Password: "example-password", RootCAs: pool})
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
	fmt.Println("resets sent:", bmc.Resets())
	// Output:
	// after off: off
	// after on: on
	// resets sent: [ForceOff On]
}
