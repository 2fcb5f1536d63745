package redfishtest_test

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

// A Redfish adapter powers a host off through the emulator; the fake.Power
// underneath tells what really happened.
func ExampleBMC() {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := redfishtest.NewBMC(time.Now, hw, "admin", "example-only")
	srv := bmc.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	ctx := context.Background()
	c, err := redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, Username: "admin", Password: "example-only", RootCAs: roots})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println(c.Off(ctx, power.ModeHard))
	fmt.Println("hardware on:", hw.HardwareOn(), "resets:", bmc.Resets(), "logins:", bmc.Logins(), "sessions:", bmc.Sessions())
	// Output:
	// <nil>
	// hardware on: false resets: [ForceOff] logins: 1 sessions: 1
}
