package ipmi

import "github.com/rebootkit/rebootkit/power"

// TogglesOff reports whether Off in mode m may be a press of the power
// button: a soft shutdown may be (IPMI leaves its implementation to the
// BMC, and some press the power button for it, which powers on a host
// that is off); power down never is. It implements reboot.Toggler: the
// reboot controller then sends a soft shutdown only on an On reading that
// cannot be an echo of a state from before its previous power-off.
func (c *Controller) TogglesOff(m power.Mode) bool { return m == power.ModeSoft }
