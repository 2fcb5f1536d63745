package inventory_test

import (
	"fmt"

	"github.com/rebootkit/rebootkit/inventory"
)

// Parse an inventory and list what a plan would see.
func ExampleParse() {
	inv, err := inventory.Parse([]byte(`
defaults:
  bmc: {username: admin, password_env: BMC_PASSWORD}
servers:
  - uuid: hn0
    headnode: true
    bmc: {redfish: "https://10.0.0.10"}
    health: {tcp: "10.0.1.10:22"}
  - uuid: cn1
    bmc: {ipmi: "10.0.0.11:623"}
    health: {http: "http://10.0.1.11:8080/healthz"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range inv.PlanServers() {
		fmt.Println(s.UUID, "core:", s.Core, "headnode:", s.Headnode)
	}
	// Output:
	// hn0 core: true headnode: true
	// cn1 core: false headnode: false
}
