package kube

import "testing"

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
