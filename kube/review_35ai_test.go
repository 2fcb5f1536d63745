package kube

import "testing"

// TestReview35ai_NoSeparatorAddressFormsRefused (review 35ai, Low). The
// baremetal-operator (pkg/hardwareutils/bmc GetParsedURL, and its unit
// tests "ipmi url, no sep", "redfish url, no sep") accepts a BMC address
// written without "//" after the scheme: "redfish:192.168.122.1" and
// "ipmi:192.168.122.1:6233" are read as "redfish://192.168.122.1" and
// "ipmi://192.168.122.1:6233". ParseBMCAddress, documented to parse the
// addresses "as the baremetal-operator writes them", refuses them
// (url.Parse leaves them Opaque, with no Host): a host the
// baremetal-operator manages is never rebooted.
func TestReview35ai_NoSeparatorAddressFormsRefused(t *testing.T) {
	for addr, want := range map[string]BMCTarget{
		"redfish:192.168.122.1":                         {Protocol: "redfish", Endpoint: "https://192.168.122.1"},
		"redfish-virtualmedia:bmc/redfish/v1/Systems/1": {Protocol: "redfish", Endpoint: "https://bmc", SystemID: "1"},
		"ipmi:192.168.122.1":                            {Protocol: "ipmi", Host: "192.168.122.1", Port: 623},
		"ipmi:192.168.122.1:6233":                       {Protocol: "ipmi", Host: "192.168.122.1", Port: 6233},
	} {
		got, err := ParseBMCAddress(addr)
		if err != nil || got != want {
			t.Errorf("ParseBMCAddress(%q) = %+v, %v; want %+v (the baremetal-operator's reading)", addr, got, err, want)
		}
	}
}
