package inventory

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35aj_TwoSpellingsOfOneIPMIBMCPassAsTwoServers (review 35aj,
// issue 35 area: inventory bmcIdentity). The inventory refuses two servers
// on one BMC ("each server needs its own BMC"). For IPMI, bmcIdentity only
// lower-cases the host and fills in port 623: an IPv4-mapped IPv6 literal
// and its IPv4 address, an IPv6 address written with and without its zero
// groups, or an IPv4 address written with and without a trailing dot... are
// two BMCs to it, though net dials one UDP address for both (ground truth:
// net.ResolveUDPAddr gives equal addresses). Both servers' IPMI commands
// then reach one chassis: rebooting or fencing server b powers off
// server a. The Redfish half of this was fixed in round 35 through
// redfish.Origin; the IPMI half was left to a hand-made spelling.
func TestReview35aj_TwoSpellingsOfOneIPMIBMCPassAsTwoServers(t *testing.T) {
	pairs := [][2]string{
		{"[::ffff:127.0.0.1]", "127.0.0.1"},
		{"[::ffff:127.0.0.1]:623", "127.0.0.1:623"},
		{"[2001:db8:0:0::1]:623", "[2001:db8::1]:623"},
		{"[2001:db8:0:0:0:0:0:1]", "2001:db8::1"},
	}
	for _, p := range pairs {
		ha, pa, err := splitHostPort(p[0], 623)
		require.NoError(t, err)
		hb, pb, err := splitHostPort(p[1], 623)
		require.NoError(t, err)
		ua, err := net.ResolveUDPAddr("udp", net.JoinHostPort(trimBrackets(ha), fmt.Sprint(pa)))
		require.NoError(t, err)
		ub, err := net.ResolveUDPAddr("udp", net.JoinHostPort(trimBrackets(hb), fmt.Sprint(pb)))
		require.NoError(t, err)
		require.True(t, ua.IP.Equal(ub.IP) && ua.Port == ub.Port, "ground truth: %s and %s dial one UDP address (%v, %v)", p[0], p[1], ua, ub)
		doc := "defaults:\n  bmc: {username: a, password_env: P}\nservers:\n" +
			fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000001, hostname: a, bmc: {ipmi: %q}, health: {tcp: 10.0.0.1:22}}\n", p[0]) +
			fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000002, hostname: b, bmc: {ipmi: %q}, health: {tcp: 10.0.0.2:22}}\n", p[1])
		_, err = Parse([]byte(doc))
		assert.ErrorContains(t, err, "is also server a's", "%s and %s are one IPMI BMC (%v): two servers on it must be refused", p[0], p[1], ua)
	}
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}
