package inventory

import (
	"context"
	"errors"
	"net/http/httptest"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestYAMLErrorNamesTheRightLine (issue 27): a badly indented key on line
// 10 was reported as "line 1" (yaml.v3 names the line where the enclosing
// block starts).
func TestYAMLErrorNamesTheRightLine(t *testing.T) {
	lines := strings.Split(strings.TrimPrefix(good, "\n"), "\n")
	// line 10 is `    health: {tcp: "10.0.1.10:22"}`; indent it by one space less
	require.Contains(t, lines[9], "health:")
	lines[9] = strings.Replace(lines[9], "    health", "   health", 1)
	_, err := Parse([]byte(strings.Join(lines, "\n")))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalid))
	assert.Contains(t, err.Error(), "line 10:")
	assert.Contains(t, err.Error(), "indentation")

	// A brace left open on line 10.
	_, err = Parse([]byte(strings.Replace(good, `bmc: {redfish: "https://10.0.0.10"}`, `bmc: {redfish: "https://10.0.0.10"`, 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 10:")
	assert.Contains(t, err.Error(), "not closed")

	// A tab on line 3.
	_, err = Parse([]byte("servers:\n  - uuid: a\n\tcore: true\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 3:")
}

// TestEmptyInventorySaysSo (issue 27): an empty file said "EOF".
func TestEmptyInventorySaysSo(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{"empty": "", "blank": "\n\n", "comments only": "# servers to come\n"} {
		path := filepath.Join(dir, "inv.yaml")
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
		_, err := Load(path)
		require.Error(t, err, name)
		assert.True(t, errors.Is(err, ErrEmpty), name)
		assert.Contains(t, err.Error(), "the inventory is empty", name)
		assert.NotContains(t, err.Error(), "EOF", name)
	}
}

// TestInventoryMessagesInOperatorsWords (issue 27): no Go types in the
// messages ("field heath not found in type inventory.Server"), servers
// named by hostname.
func TestInventoryMessagesInOperatorsWords(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(good, "health: {tcp:", "heath: {tcp:", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `line 11: unknown key "heath"`)
	assert.NotContains(t, err.Error(), "inventory.Server")

	_, err = Parse([]byte(strings.Replace(good, "headnode: true", "headnode: maybe", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 8: maybe: want true or false")
	assert.NotContains(t, err.Error(), "!!str")

	_, err = Parse([]byte(strings.Replace(good, `{http: "http://10.0.1.11:8080/healthz", status: 204}`, `{}`, 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server 2 (compute-1): health")
}

// TestLogsNameServersByHostname (issue 27): the reboot decisions were
// logged with the server's 36-character UUID as "host".
func TestLogsNameServersByHostname(t *testing.T) {
	inv, err := Parse([]byte(good))
	require.NoError(t, err)
	var b strings.Builder
	l := withHostnames(slog.New(slog.NewTextHandler(&b, nil)), inv)
	l.Info("reboot decision", "host", "cn1", "phase", "held-off")
	l.With("plan", "p").Info("other", "host", "unknown-host")
	assert.Contains(t, b.String(), "host=compute-1 uuid=cn1 phase=held-off")
	assert.Contains(t, b.String(), "plan=p host=unknown-host")
}

// TestNoSessionServiceSaysBasicAuth (issue 27): a Redfish service without
// a SessionService (sushy-tools) failed with "set BasicAuth", a Go field
// name; the message names the inventory key.
func TestNoSessionServiceSaysBasicAuth(t *testing.T) {
	p := fake.NewPower(time.Now, fake.PowerConfig{})
	bmc := redfishtest.NewBMC(time.Now, p, "admin", "pw-no-session")
	bmc.Quirks.NoSessionService = true
	srv := httptest.NewServer(bmc)
	defer srv.Close()
	t.Setenv("NOSESSION_PW", "pw-no-session")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Connect(ctx, BMC{Redfish: srv.URL, Username: "admin", PasswordEnv: "NOSESSION_PW"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set basic_auth: true")
	assert.NotContains(t, err.Error(), "BasicAuth")
	assert.ErrorIs(t, err, redfish.ErrNoSessionService)
	c, err := Connect(ctx, BMC{Redfish: srv.URL, Username: "admin", PasswordEnv: "NOSESSION_PW", BasicAuth: new(true)})
	require.NoError(t, err, "with basic_auth it works")
	_, err = c.State(ctx)
	assert.NoError(t, err)
}
