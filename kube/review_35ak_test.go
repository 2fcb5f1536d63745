package kube

import (
	"net"
	"strconv"
	"testing"
)

// TestReview35ak_IPMIAddressDialsFoldedHost (review 35aj fix, review 35ak,
// Low). Round 36 made ParseBMCAddress's IPMI Host ipmi.CanonicalHost of
// the address's host, and Powers.controllerOf dials that Host
// (ipmi.Config{Host: t.Host}), not the host as written. CanonicalHost
// lower-cases with strings.ToLower, which folds U+212A KELVIN SIGN into
// ASCII 'k': the address ipmi://\u212Abmc.example (a name Go's resolver
// refuses) sends this host's IPMI session, username and power commands to
// kbmc.example, another server's BMC.
func TestReview35ak_IPMIAddressDialsFoldedHost(t *testing.T) {
	bt, err := ParseBMCAddress("ipmi://\u212Abmc.example:623")
	if err == nil && bt.Host == "kbmc.example" {
		t.Errorf("ParseBMCAddress(ipmi://\\u212Abmc.example) dials Host %q: another BMC than the one written", bt.Host)
	}
}

// TestReview35ak_IPMIAddressWithoutHostDialsLocalhost (review 35ak, Low).
// ParseBMCAddress refuses a Redfish address without a host
// (redfish.Origin: "endpoint must name a host", ErrBMCAddress) but takes
// ipmi://:623 with Host "": the address is not reported as invalid
// (ErrBMCAddress); every such host is named the one Pool BMC ":623", and
// the mistake shows only at each power call, as ipmi.Connect's ErrConfig
// (ipmi.Config.withDefaults refuses Host ""), retried as a login failure.
func TestReview35ak_IPMIAddressWithoutHostDialsLocalhost(t *testing.T) {
	for _, a := range []string{"ipmi://:623", "ipmi://:623?privilegelevel=OPERATOR", "ipmi:%3A623"} {
		bt, err := ParseBMCAddress(a)
		if err == nil && bt.Host == "" {
			t.Errorf("ParseBMCAddress(%q) = Host %q Port %d, no error: Pool BMC %q", a, bt.Host, bt.Port, net.JoinHostPort(bt.Host, strconv.Itoa(bt.Port)))
		}
	}
}
