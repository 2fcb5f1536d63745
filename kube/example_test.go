package kube_test

import (
	"fmt"

	"github.com/rebootkit/rebootkit/kube"
)

// The BMC addresses of BareMetalHosts, as the power adapters need them.
func ExampleParseBMCAddress() {
	for _, addr := range []string{"redfish://10.0.0.5/redfish/v1/Systems/1", "ipmi://10.0.0.6", "idrac-redfish+http://bmc:8000/redfish/v1/Systems/System.Embedded.1"} {
		t, err := kube.ParseBMCAddress(addr)
		fmt.Printf("%s %s %s %s %d %v\n", t.Protocol, t.Endpoint, t.SystemID, t.Host, t.Port, err)
	}
	// Output:
	// redfish https://10.0.0.5 1  0 <nil>
	// ipmi   10.0.0.6 623 <nil>
	// redfish http://bmc:8000 System.Embedded.1  0 <nil>
}
