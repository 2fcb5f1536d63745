package redfish_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// TestErrorTextWithoutPeerControlCharacters: a BMC's error message with
// terminal escapes (OSC 52, OSC 0, CSI 2J) reaches the error's text
// without a control character (termsafe.Clean in redact), its words kept
// (TestReview39ab_BMCErrorTextEscapesReachEvents, kube).
func TestErrorTextWithoutPeerControlCharacters(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	body := `{"error":{"code":"Base.1.0.GeneralError","message":"\u001b]52;c;cm0gLXJmIH4K\u0007\u001b]0;owned\u0007\u001b[2Jcall your operator"}}`
	r.bmc.FailNextGet("/redfish/v1/Systems/1", 500, body)
	_, err := c.State(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "call your operator", "premise: the BMC's words reach the error")
	assert.False(t, strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }), "%q", err.Error())
}
