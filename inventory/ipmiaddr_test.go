package inventory

import (
	"fmt"
	"testing"
)

// TestIPMIWithoutHostRefused: a bmc.ipmi that names no host ("" or only
// the root ".") is refused at load time (review 35ak, 35al).
func TestIPMIWithoutHostRefused(t *testing.T) {
	for _, ipmi := range []string{":623", "[]:623", ".:623", "."} {
		doc := "defaults:\n  bmc: {username: a, password_env: P}\nservers:\n" +
			fmt.Sprintf("  - {uuid: 00000000-0000-4000-8000-000000000001, hostname: a, bmc: {ipmi: %q}, health: {tcp: 10.0.0.1:22}}\n", ipmi)
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("bmc.ipmi %q (no host) accepted", ipmi)
		}
	}
}
