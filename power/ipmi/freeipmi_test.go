package ipmi_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
)

// TestFreeIPMIDrivesFakeBMC: FreeIPMI's ipmi-chassis (IPMI v2.0, cipher
// suites 3 and 17) reads and changes the power of the emulated BMC, and
// the hardware does what it was told (ground truth).
func TestFreeIPMIDrivesFakeBMC(t *testing.T) {
	tool, err := exec.LookPath("ipmi-chassis")
	if err != nil {
		skipInterop(t, "ipmi-chassis not installed (apt-get install freeipmi-tools)")
	}
	b, hw := newBMC(t, fake.PowerConfig{})
	for _, suite := range []string{"3", "17"} {
		run := func(args ...string) string {
			t.Helper()
			all := append([]string{"-D", "LAN_2_0", "-h", fmt.Sprintf("%s:%d", b.Host(), b.Port()), "-u", user, "-p", pass,
				"-I", suite, "-l", "OPERATOR", "--session-timeout=2000"}, args...)
			out, err := exec.Command(tool, all...).CombinedOutput()
			require.NoError(t, err, "ipmi-chassis %v: %s", args, out)
			return string(out)
		}
		assert.Contains(t, run("--get-status"), "System Power                        : on", "suite %s", suite)
		run("--chassis-control=POWER-DOWN")
		assert.False(t, hw.HardwareOn(), "suite %s", suite)
		assert.True(t, strings.Contains(run("--get-status"), ": off"), "suite %s", suite)
		run("--chassis-control=POWER-UP")
		assert.True(t, hw.HardwareOn(), "suite %s", suite)
	}
}
