package kube

import (
	"testing"
)

// TestReview35ah_PathPrefixedBMCsCollapseToOneEndpoint (BMCTarget.Endpoint:
// "in its one canonical spelling (redfish.Origin): one BMC, one
// Endpoint"; redfish.Origin: "a path of its own (a BMC behind a proxy)
// is kept", "https://proxy/bmc1 is not https://proxy/bmc2"): the
// baremetal-operator hands ironic the address's whole path as the
// system (redfish_system_id = "/bmc1/redfish/v1/Systems/1" on
// https://proxy.example), so two BareMetalHosts whose addresses differ in
// the path before /redfish/v1 name two systems (two BMCs behind one
// proxy). ParseBMCAddress builds the Endpoint from the host alone
// (redfish.Origin(web + "://" + u.Host)) and keeps only what follows the
// last "/Systems/": both hosts become Endpoint https://proxy.example,
// SystemID "1", one window key, one Pool BMC and, with equal
// credentials, one session: each host's power commands (a fence
// included) go to the proxy root's system 1, not to the BMC its
// BareMetalHost names, and bmc2's password is sent where bmc1's goes.
// Correct: the two addresses give two targets (the prefix kept in the
// Endpoint, or the system's whole path kept), or the address is refused.
func TestReview35ah_PathPrefixedBMCsCollapseToOneEndpoint(t *testing.T) {
	a, errA := ParseBMCAddress("redfish://proxy.example/bmc1/redfish/v1/Systems/1")
	b, errB := ParseBMCAddress("redfish://proxy.example/bmc2/redfish/v1/Systems/1")
	if errA != nil || errB != nil {
		return // refused: no wrong system powered
	}
	if a.Endpoint == b.Endpoint && a.SystemID == b.SystemID {
		t.Fatalf("two BMCs behind one proxy (/bmc1 and /bmc2) are one target %+v: every power command of either host goes to the same system, "+
			"which is neither BMC's as the baremetal-operator addresses them", a)
	}
	// And a path that does not end in /Systems/ID is not the proxy root's
	// only system.
	c, errC := ParseBMCAddress("redfish://proxy.example/bmc3")
	if errC == nil && c.Endpoint == "https://proxy.example" && c.SystemID == "" {
		t.Errorf("redfish://proxy.example/bmc3 is read as the only system of https://proxy.example (%+v): the path is dropped", c)
	}
}
