package kube

import (
	"net"
	"strconv"
	"testing"
)

// TestReview35aj_IPMIAddressSpellingsAreTwoPoolBMCs (review 35aj, Low).
// Powers.controllerOf names an IPMI BMC to the Pool by
// net.JoinHostPort(t.Host, t.Port) straight from ParseBMCAddress, which
// keeps the host as written. The Redfish branch makes "a host name's case,
// an IPv6 address's form" one Endpoint (redfish.Origin); the IPMI branch
// does not: ipmi://BMC.example and ipmi://bmc.example:623, or
// ipmi://[::ffff:10.0.0.5] and ipmi://10.0.0.5, dial one UDP address but
// are two Pool BMCs (Target.BMC), so the Pool's per-BMC rules (one login
// at a time, MaxSessions, the login back-off keyed by Target.BMC through
// CredentialsKey) split across spellings of one BMC. Ground truth: DNS
// names are case-insensitive, and net parses both IP forms to one address.
func TestReview35aj_IPMIAddressSpellingsAreTwoPoolBMCs(t *testing.T) {
	pairs := [][2]string{
		{"ipmi://BMC.example", "ipmi://bmc.example:623"},
		{"ipmi://[::ffff:10.0.0.5]", "ipmi://10.0.0.5"},
		{"ipmi://[2001:DB8:0:0::1]:623", "ipmi://[2001:db8::1]"},
	}
	for _, p := range pairs {
		a, err := ParseBMCAddress(p[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseBMCAddress(p[1])
		if err != nil {
			t.Fatal(err)
		}
		if ia, ib := net.ParseIP(a.Host), net.ParseIP(b.Host); ia != nil && (ib == nil || !ia.Equal(ib)) {
			t.Fatalf("ground truth: %s and %s are not one address", a.Host, b.Host)
		}
		// The Pool's BMC name, as controllerOf builds it.
		na := net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
		nb := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		if na != nb {
			t.Errorf("%s and %s reach one IPMI BMC but are two Pool BMCs: Target.BMC %q and %q", p[0], p[1], na, nb)
		}
	}
}
