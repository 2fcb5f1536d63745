package redfish_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power/redfish"
)

// TestOriginFullStopsAfterMapping: one trailing dot is dropped after the
// IDNA mapping (which makes '.' of U+3002, U+FF0E and of '.' followed by
// an ignored U+00AD), and a host left with an empty label is refused.
func TestOriginFullStopsAfterMapping(t *testing.T) {
	for _, ep := range []string{"https://bmc1.example", "https://BMC1.example.", "https://bmc1.example\u3002", "https://bmc1.example\uff0e", "https://bmc1.example.\u00ad"} {
		o, err := redfish.Origin(ep)
		require.NoError(t, err, ep)
		require.Equal(t, "https://bmc1.example", o, ep)
	}
	for _, ep := range []string{"https://bmc1.example..", "https://bmc1.example.\u3002", "https://bmc1..example", "https://.bmc1.example", "https://bmc1\u3002\u3002example"} {
		_, err := redfish.Origin(ep)
		require.ErrorIs(t, err, redfish.ErrConfig, ep)
	}
}
