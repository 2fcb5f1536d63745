package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35ae_OneChassisTwoBMCNames (review round 31): power.Pool's
// duty for its caller is "Give each BMC one stable Target.BMC name (its
// address)": the Pool shares one session per BMC and login, logs in
// one at a time per BMC, bounds MaxSessions and the login rate per BMC
// by that name, and power/redfish keeps a system's reset and press
// windows by its Endpoint. The kube controller takes both from the
// BareMetalHost's address as written (kube/power.go:89 and :321):
// the blades of one chassis whose addresses the baremetal-operator's
// users wrote with different drivers or spellings of one BMC (redfish://
// and redfish-virtualmedia:// with the default port spelled out, a host
// name's case, an IPv6 address's form) get different names, so the
// Pool sees several BMCs: a session and a login gate each, each bound
// counted apart (issue 35 point 2: one session per endpoint and
// credentials), and a host whose address is rewritten to another
// spelling loses its adapter windows
// (power.TestReview35ae_RespelledEndpointForgetsResetWindowPoweringFencedHostOn).
// The IPMI branch already names its BMC with the default port filled in.
func TestReview35ae_OneChassisTwoBMCNames(t *testing.T) {
	for _, pair := range [][2]string{
		{"redfish://10.0.0.1/redfish/v1/Systems/1", "redfish-virtualmedia://10.0.0.1:443/redfish/v1/Systems/2"},
		{"redfish://bmc1.example.com/redfish/v1/Systems/1", "idrac-virtualmedia://BMC1.example.com/redfish/v1/Systems/2"},
		{"redfish+http://10.0.0.1/redfish/v1/Systems/1", "redfish+http://10.0.0.1:80/redfish/v1/Systems/2"},
		{"redfish://[fd00::1]/redfish/v1/Systems/1", "redfish://[fd00:0:0:0:0:0:0:1]:443/redfish/v1/Systems/2"},
	} {
		a, err := ParseBMCAddress(pair[0])
		require.NoError(t, err)
		b, err := ParseBMCAddress(pair[1])
		require.NoError(t, err)
		assert.Equal(t, a.Endpoint, b.Endpoint,
			"%s and %s name one BMC: the Pool must see one BMC (one Target.BMC), the adapter one Endpoint", pair[0], pair[1])
	}
	// Control: IPMI fills the default port in.
	a, _ := ParseBMCAddress("ipmi://10.0.0.1")
	b, _ := ParseBMCAddress("ipmi://10.0.0.1:623")
	require.Equal(t, a, b)
}
