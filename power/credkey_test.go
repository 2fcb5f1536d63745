package power_test

import (
	"strings"
	"testing"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
)

// TestCredentialsKey: equal parts give equal keys; any change of a part,
// or a shift of a boundary between parts, gives another; the key holds no
// part in clear.
func TestCredentialsKey(t *testing.T) {
	k := power.CredentialsKey("https://bmc", "admin", "s3cret", "insecure=false")
	assert.Equal(t, k, power.CredentialsKey("https://bmc", "admin", "s3cret", "insecure=false"))
	for _, other := range [][]string{
		{"https://bmc", "admin", "s3cre7", "insecure=false"},
		{"https://bmc", "admin", "s3cret", "insecure=true"},
		{"https://bmc", "admins3", "cret", "insecure=false"},
		{"https://bmc2", "admin", "s3cret", "insecure=false"},
		{"https://bmc", "admin", "s3cret"},
	} {
		assert.NotEqual(t, k, power.CredentialsKey(other...), "%q", other)
	}
	assert.NotContains(t, k, "s3cret")
	assert.False(t, strings.ContainsAny(k, "\x00 /+="), "the key is URL-safe text: %q", k)
}
