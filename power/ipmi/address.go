package ipmi

import (
	"net/netip"
	"strings"
)

// CanonicalHost writes an IPMI BMC's host in one spelling, so that two
// spellings of one BMC are one name to a power.Pool (Target.BMC) and to
// an inventory's one-BMC-per-server check: an IP literal in its canonical
// form (an IPv4-mapped IPv6 address as IPv4, IPv6 compressed and
// lower-case, brackets dropped), a host name lower-cased without its
// trailing dot (DNS names are case-insensitive). It dials the same BMC as
// the host as written.
func CanonicalHost(host string) string {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}
