package inventory

import (
	"fmt"
	"testing"
)

// TestReview35ak_IPMIWithoutHostAccepted (review 35ak, Low). A Redfish
// address without a host is refused by Parse (redfish.Origin: "endpoint
// must name a host"), but bmc.ipmi ":623" passes (splitHostPort returns
// host "" without complaint): the inventory validates, and the mistake
// shows only at the server's first power call (ipmi.Connect's ErrConfig,
// Host ""), in the middle of a plan.
func TestReview35ak_IPMIWithoutHostAccepted(t *testing.T) {
	for _, ipmi := range []string{":623", "[]:623"} {
		doc := "defaults:\n  bmc: {username: a, password_env: P}\nservers:\n" +
			fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000001, hostname: a, bmc: {ipmi: %q}, health: {tcp: 10.0.0.1:22}}\n", ipmi)
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("bmc.ipmi %q (no host) accepted: refused only at the first power call", ipmi)
		}
	}
}
