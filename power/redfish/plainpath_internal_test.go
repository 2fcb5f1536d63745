package redfish

import (
	"errors"
	"testing"
)

// TestPlainPathRefusesEmptySegment: one rule for the endpoint's path and
// every path a BMC gives: an empty segment ("//") is refused, since a
// slash-merging proxy reads it as another path than one that does not;
// a trailing '/' is no segment and stays accepted.
func TestPlainPathRefusesEmptySegment(t *testing.T) {
	for _, p := range []string{"/redfish/v1//Systems/1", "/redfish/v1/Systems//", "/~bmc1//redfish"} {
		if plainPath(p) {
			t.Errorf("plainPath(%q) = true", p)
		}
		if bmcPath(p) {
			t.Errorf("bmcPath(%q) = true", p)
		}
	}
	for _, p := range []string{"/redfish/v1/Systems/1", "/redfish/v1/", "/"} {
		if !plainPath(p) || !bmcPath(p) {
			t.Errorf("plainPath/bmcPath(%q) = false", p)
		}
	}
	for _, ep := range []string{"https://proxy//~bmc1", "https://proxy/~bmc1//", "https://proxy/a//b"} {
		if _, err := Origin(ep); !errors.Is(err, ErrConfig) {
			t.Errorf("Origin(%q): %v, want ErrConfig", ep, err)
		}
	}
	if o, err := Origin("https://proxy/~bmc1/"); err != nil || o != "https://proxy/~bmc1" {
		t.Errorf("Origin(https://proxy/~bmc1/) = %q, %v", o, err)
	}
}
