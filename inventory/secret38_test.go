package inventory

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPasswordTypedIntoPasswordEnvNeverEchoed: a password typed into
// password_env is refused by Parse without being echoed, and never echoed
// by the "not set" error; a health.http URL with user:password is never
// printed raw (issue 38, 13; old code: accepted, and the "not set" error
// and the health error printed them).
func TestPasswordTypedIntoPasswordEnvNeverEchoed(t *testing.T) {
	const secret = "Tr0ub4dor&3-horse"
	inv := "servers:\n  - uuid: 00000000-0000-4000-8000-000000000001\n    hostname: cn1\n    platform: \"1\"\n" +
		"    bmc: {redfish: \"https://10.0.0.1\", username: admin, password_env: \"" + secret + "\"}\n    health: {tcp: \"10.0.0.2:22\"}\n"
	_, err := Parse([]byte(inv))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
	assert.Contains(t, err.Error(), "password_env")

	_, err = BMC{PasswordEnv: "hunter2secret"}.Password()
	require.ErrorIs(t, err, ErrNoPassword)
	assert.NotContains(t, err.Error(), "hunter2secret")
	_, err = BMC{PasswordEnv: "REBOOTKIT_TEST_UNSET_VAR"}.Password()
	assert.Contains(t, err.Error(), "REBOOTKIT_TEST_UNSET_VAR", "a variable's name is shown")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	for _, u := range []string{strings.Replace(srv.URL, "http://", "http://admin:"+secret+"@", 1) + "/health", "http://admin:" + secret + "@127.0.0.1:1/health"} {
		err := Inventory{}.CheckHealth(t.Context(), Server{Health: Health{HTTP: u}})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret)
	}
}
