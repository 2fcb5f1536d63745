package kube

import (
	"errors"
	"strings"
	"testing"
)

// TestParseBMCAddressPathPrefix: the path before /redfish/v1/Systems/<id>
// stays in the Endpoint (a BMC behind a path proxy); a path of another
// form is refused, naming the expected form, rather than guessed.
func TestParseBMCAddressPathPrefix(t *testing.T) {
	for addr, want := range map[string]BMCTarget{
		"redfish://proxy.example/bmc1/redfish/v1/Systems/1":               {Protocol: "redfish", Endpoint: "https://proxy.example/bmc1", SystemID: "1"},
		"redfish+http://Proxy.example:80/%7ebmc2/redfish/v1/Systems/A.1/": {Protocol: "redfish", Endpoint: "http://proxy.example/~bmc2", SystemID: "A.1"},
		"redfish://bmc/redfish/v1/Systems/1":                              {Protocol: "redfish", Endpoint: "https://bmc", SystemID: "1"},
		"redfish://bmc/":                                                  {Protocol: "redfish", Endpoint: "https://bmc"},
	} {
		got, err := ParseBMCAddress(addr)
		if err != nil || got != want {
			t.Errorf("ParseBMCAddress(%q) = %+v, %v; want %+v", addr, got, err, want)
		}
	}
	for _, addr := range []string{"redfish://proxy.example/bmc3", "redfish://h/x/Systems/y", "redfish://h/redfish/v1/Systems/", "redfish://h/redfish/v1/Systems/a%2Fb", "redfish://h/p//q/redfish/v1/Systems/1"} {
		_, err := ParseBMCAddress(addr)
		if !errors.Is(err, ErrBMCAddress) {
			t.Errorf("ParseBMCAddress(%q): %v, want ErrBMCAddress", addr, err)
			continue
		}
		if !strings.Contains(addr, "p//q") && !strings.Contains(err.Error(), "/redfish/v1/Systems/<id>") {
			t.Errorf("ParseBMCAddress(%q): %v does not name the expected form", addr, err)
		}
	}
}
