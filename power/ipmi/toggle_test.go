package ipmi_test

import (
	"testing"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
)

// Issue 36, point 6: a soft shutdown may be a press of the power button
// on some BMCs; the adapter says so, so that the reboot controller never
// sends one to a host that may be off.
func TestIssue36SoftShutdownMayToggle(t *testing.T) {
	var c *ipmi.Controller
	if !c.TogglesOff(power.ModeSoft) {
		t.Error("a soft shutdown may be a button press")
	}
	if c.TogglesOff(power.ModeHard) {
		t.Error("power down sets the power")
	}
}
