package redfish_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// The interop tests drive redfishtest.BMC with third-party Redfish clients:
// OpenStack's sushy (what Ironic uses; Debian python3-sushy) and DMTF's
// redfishtool (Debian redfishtool). CI installs both (.ci/run); where they
// are missing the tests skip with a loud message, and .ci/run refuses to
// pass without them on a machine that has apt.

const sushyScript = `
import sys, sushy
from sushy import auth
url, user, pw, ca, mode = sys.argv[1:6]
a = auth.SessionAuth(user, pw) if mode == "session" else auth.BasicAuth(user, pw)
s = sushy.Sushy(url + "/redfish/v1/", auth=a, verify=ca)
system = s.get_system("/redfish/v1/Systems/1")
print("power", system.power_state)
print("allowed", ",".join(sorted(str(v) for v in system.get_allowed_reset_system_values())))
system.reset_system(sushy.RESET_FORCE_OFF)
system.refresh()
print("after", system.power_state)
if mode == "session":
    print("session", a.get_session_resource_id())
    a.close()
print("ok")
`

func pythonWithSushy(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(py, "-c", "import sushy").Run(); err == nil {
			return py
		}
	}
	skipInterop(t, "python3-sushy is not installed (apt-get install -y python3-sushy); .ci/run installs it")
	return ""
}

// skipInterop skips loudly, or fails where .ci/run installed the clients
// (REBOOTKIT_REQUIRE_INTEROP=1): there a skip would hide a broken install.
func skipInterop(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("REBOOTKIT_REQUIRE_INTEROP") == "1" {
		t.Fatalf("interop client missing although CI installed it: %s", why)
	}
	t.Skip("INTEROP TEST SKIPPED: " + why)
}

// caRig serves the rig's BMC again with a certificate signed by a test CA
// (Python's ssl wants a proper chain) and returns the CA's PEM file.
func caRig(t *testing.T, r *rig) string {
	t.Helper()
	ca, err := redfishtest.NewCA()
	require.NoError(t, err)
	r.srv.Close()
	r.srv = r.bmc.StartTLSWithCA(ca)
	t.Cleanup(r.srv.Close)
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, ca.PEM(), 0o600))
	return path
}

func TestInteropSushy(t *testing.T) {
	py := pythonWithSushy(t)
	script := filepath.Join(t.TempDir(), "sushy_client.py")
	require.NoError(t, os.WriteFile(script, []byte(sushyScript), 0o600))
	for _, mode := range []string{"session", "basic"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
			caFile := caRig(t, r)
			cmd := exec.Command(py, script, r.srv.URL, "admin", secret, caFile, mode)
			// requests lets these override the verify argument.
			cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+caFile, "CURL_CA_BUNDLE="+caFile)
			out, err := cmd.CombinedOutput()
			t.Logf("sushy (%s):\n%s", mode, out)
			require.NoError(t, err)
			s := string(out)
			assert.Contains(t, s, "power PowerState.ON")
			assert.Contains(t, s, "FORCE_OFF")
			assert.Contains(t, s, "after PowerState.OFF")
			assert.Contains(t, s, "ok")
			assert.False(t, r.hw.HardwareOn(), "ForceOff through sushy")
			assert.Equal(t, []string{"ForceOff"}, r.bmc.Resets())
			assert.Zero(t, r.bmc.Sessions(), "sushy's session was closed")
		})
	}
}

func redfishtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redfishtool")
	if err != nil {
		skipInterop(t, "redfishtool is not installed (apt-get install -y redfishtool); .ci/run installs it")
	}
	return p
}

func TestInteropRedfishtool(t *testing.T) {
	tool := redfishtool(t)
	for _, auth := range []string{"Session", "Basic"} {
		t.Run(auth, func(t *testing.T) {
			r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{Lag: 2 * time.Second})
			caFile := caRig(t, r)
			host := strings.TrimPrefix(r.srv.URL, "https://")
			run := func(args ...string) string {
				base := []string{"-r", host, "-u", "admin", "-p", secret, "-A", auth, "-S", "Always", "-T", "5"}
				cmd := exec.Command(tool, append(base, args...)...)
				cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+caFile, "CURL_CA_BUNDLE="+caFile)
				out, err := cmd.CombinedOutput()
				t.Logf("redfishtool %s: %s", strings.Join(args, " "), out)
				require.NoError(t, err, "redfishtool %v", args)
				return string(out)
			}
			if auth == "Session" {
				// Its own session is the BMC's first (this used to crash it).
				assert.Contains(t, run("SessionService", "Sessions", "-i", "1"), `"UserName": "admin"`)
			}
			assert.Contains(t, run("versions"), "/redfish/v1/")
			assert.Contains(t, run("Systems", "-I", "1", "get"), `"PowerState": "On"`)
			out := run("Systems", "-1", "get", "-P", "Actions")
			assert.Contains(t, out, "ForceOff")
			run("Systems", "-I", "1", "reset", "ForceOff")
			r.clk.Advance(3 * time.Second)
			assert.False(t, r.hw.HardwareOn())
			assert.Contains(t, run("Systems", "-I", "1", "get", "-P", "PowerState"), "Off")
			run("SessionService", "get")
			run("SessionService", "Sessions")
			assert.Zero(t, r.bmc.Sessions(), "redfishtool left a session open")
			st, err := r.hw.State(ctx)
			require.NoError(t, err)
			assert.Equal(t, power.StateOff, st)
		})
	}
}
