package inventory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power/redfish"
)

// TestReview35ai_TwoSpellingsOfOneBMCPassAsTwoServers (review 35ai,
// issue 35 area: the BMC address parsing that feeds the Pool). The
// inventory refuses two servers on one BMC (and system): "each server
// needs its own BMC". It tells BMCs apart by bmcIdentity, a hand-made
// spelling (host lower-cased, default port filled in), while everything
// that then talks to the BMC (Fleet.controller's Target.BMC, the Redfish
// adapter's Endpoint, its window registry, session sharing) names it by
// redfish.Origin. Two spellings that Origin makes one BMC ("bmc." and
// "bmc", "[::ffff:10.0.0.5]" and "10.0.0.5", port "0443" and none, an
// IPv6 address's case and zeros, an IDN host and its punycode) pass the check as two servers: both
// servers' power commands then go to the one system, so rebooting or
// fencing server b powers off server a's host.
func TestReview35ai_TwoSpellingsOfOneBMCPassAsTwoServers(t *testing.T) {
	pairs := [][2]string{
		{"https://bmc.example.", "https://bmc.example"},
		{"https://[::ffff:10.0.0.5]", "https://10.0.0.5"},
		{"https://bmc.example:0443", "https://bmc.example"},
		{"https://[2001:DB8:0:0::1]", "https://[2001:db8::1]"},
		{"https://bücher.example", "https://xn--bcher-kva.example"},
	}
	for _, p := range pairs {
		for _, sys := range []string{"", "1"} {
			oa, err := redfish.Origin(p[0])
			require.NoError(t, err)
			ob, err := redfish.Origin(p[1])
			require.NoError(t, err)
			require.Equal(t, oa, ob, "ground truth: the adapter, the Pool and the window registry take %s and %s for one BMC", p[0], p[1])
			system := ""
			if sys != "" {
				system = ", system: " + sys
			}
			doc := "defaults:\n  bmc: {username: a, password_env: P}\nservers:\n" +
				fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000001, hostname: a, bmc: {redfish: %q%s}, health: {tcp: 10.0.0.1:22}}\n", p[0], system) +
				fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000002, hostname: b, bmc: {redfish: %q%s}, health: {tcp: 10.0.0.2:22}}\n", p[1], system)
			_, err = Parse([]byte(doc))
			assert.ErrorContains(t, err, "is also server a's", "%s and %s (system %q) are one BMC (Origin %s): two servers on it must be refused", p[0], p[1], sys, oa)
		}
	}
}
