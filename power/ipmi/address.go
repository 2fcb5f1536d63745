package ipmi

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// CanonicalHost writes an IPMI BMC's host in one spelling that dials the
// same BMC as the host as written: an IP literal in its canonical form
// (an IPv4-mapped IPv6 address as IPv4, IPv6 compressed and lower-case,
// brackets dropped), a host name with its ASCII letters lower-cased (DNS
// folds ASCII case only, RFC 4343: other characters are kept as written)
// and its trailing dot, if any, kept (a rooted name is not looked up in
// the resolver's search list).
func CanonicalHost(host string) string {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return asciiLower(h)
}

// BMCName is the name of the IPMI BMC at host and port for a power.Pool
// (Target.BMC) and an inventory's one-BMC-per-server check: CanonicalHost
// without a trailing dot, and the port, so that two spellings of one BMC
// are one name. It is a name, not what to dial: dial CanonicalHost.
func BMCName(host string, port int) string {
	return net.JoinHostPort(strings.TrimSuffix(CanonicalHost(host), "."), strconv.Itoa(port))
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
