package kube

import (
	"errors"
	"testing"
)

// TestParseBMCAddressIPMINoHost: an IPMI address that names no host ("",
// or only the root ".") is refused when parsed, not at the first power
// call (review 35ak, 35al).
func TestParseBMCAddressIPMINoHost(t *testing.T) {
	for _, a := range []string{"ipmi://:623", "ipmi://.:623", "ipmi://."} {
		if bt, err := ParseBMCAddress(a); !errors.Is(err, ErrBMCAddress) {
			t.Errorf("ParseBMCAddress(%q) = %+v, %v; want an error wrapping ErrBMCAddress", a, bt, err)
		}
	}
	if bt, err := ParseBMCAddress("ipmi://bmc.example.:623"); err != nil || bt.Host != "bmc.example." {
		t.Errorf("a rooted host name: %+v, %v; want it kept as written (it dials otherwise without its dot)", bt, err)
	}
}
