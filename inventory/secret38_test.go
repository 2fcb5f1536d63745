package inventory

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
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

// TestChangedPasswordFileTriedAtOnce: a BMC refuses the password of the
// password_file, and the Pool backs off that login; once the file holds
// the right password, the next call logs in at once (issue 38, B.10; old
// code: the login kept its key, so the corrected password waited for the
// auth back-off, up to 30 min).
func TestChangedPasswordFileTriedAtOnce(t *testing.T) {
	const good = "right-Passw0rd"
	file := filepath.Join(t.TempDir(), "bmc.pass")
	require.NoError(t, os.WriteFile(file, []byte("wrong-password\n"), 0o600))
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Real, fake.PowerConfig{})
	inv := Inventory{Servers: []Server{{UUID: "u0", Hostname: "cn0", Health: Health{TCP: "h:1"},
		BMC: BMC{Redfish: "https://bmc0", Username: "admin", PasswordFile: file}}}}
	logins := 0
	f, err := OpenFleet(inv, filepath.Join(t.TempDir(), "fleet.db"), Options{Now: clk.Now, Monotonic: clk.Monotonic, manual: true,
		Controller: func(_ context.Context, s Server) (power.Controller, error) {
			logins++
			if pass, err := s.BMC.Password(); err != nil || pass != good {
				return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Message: "authentication failed", Err: power.ErrAuth}
			}
			return p, nil
		}})
	require.NoError(t, err)
	defer f.Close()
	state := func() error {
		c, err := f.controller("u0")
		require.NoError(t, err)
		_, err = c.State(t.Context())
		return err
	}
	require.ErrorIs(t, state(), power.ErrAuth)
	require.Equal(t, 1, logins)
	clk.Advance(time.Second)
	require.Error(t, state(), "the refused login backs off")
	require.Equal(t, 1, logins, "no login during the back-off")
	require.NoError(t, os.WriteFile(file, []byte(good+"\n"), 0o600))
	clk.Advance(time.Second)
	assert.NoError(t, state(), "the corrected password is tried at once")
	assert.Equal(t, 2, logins)
}
