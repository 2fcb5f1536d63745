package fake

import (
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// ButtonKind says which calls of a Power press its power button instead
// of setting the power. A press toggles the hardware: pressed while the
// hardware is off it powers it on; pressed while it runs it asks the
// operating system to shut down (off PowerConfig.SoftDelay later, nothing
// with IgnoreSoft); pressed while a change is under way (a shutdown, a
// power-on, a power-off the BMC already shows as complete) it is lost in
// it. The zero value, ButtonNone, is the Power every other test knows.
type ButtonKind int

const (
	// ButtonNone: every call sets the power (On, ForceOff,
	// GracefulShutdown).
	ButtonNone ButtonKind = iota
	// ButtonSoft: a soft Off presses the button; hard Off and On set the
	// power. A BMC with no graceful reset type (HPE iLO-like firmware that
	// offers PushPowerButton for soft), or an IPMI BMC that implements soft
	// shutdown as a press.
	ButtonSoft
	// ButtonAll: every On and Off presses the button (a BMC whose only
	// reset type is PushPowerButton).
	ButtonAll
)

// String returns "none", "soft" or "all".
func (k ButtonKind) String() string {
	switch k {
	case ButtonNone:
		return "none"
	case ButtonSoft:
		return "soft"
	case ButtonAll:
		return "all"
	}
	return fmt.Sprintf("ButtonKind(%d)", int(k))
}

// TogglesOff reports whether Off in mode m presses the power button (see
// PowerConfig.Button): sent to a host that is off, it powers it on. It is
// the optional interface reboot.Toggler.
func (p *Power) TogglesOff(m power.Mode) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pressesOff(m)
}

// TogglesOn reports whether On presses the power button (ButtonAll): sent
// to a host that runs, it asks its OS to shut down. It is the optional
// interface reboot.OnToggler.
func (p *Power) TogglesOn() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Button == ButtonAll
}

func (p *Power) pressesOff(m power.Mode) bool {
	return p.cfg.Button == ButtonAll || p.cfg.Button == ButtonSoft && m == power.ModeSoft
}

// press presses the power button at at; p.mu is held and the state is
// settled to at.
func (p *Power) press(at time.Time) {
	switch {
	case !p.on:
		p.schedule(power.StateOn, at, false) // off: the press powers it on
	case p.pend != nil || !p.offAt.IsZero():
		// A change under way (the OS shutting down, a power-on or a
		// power-off in progress): the press is lost in it.
	case p.cfg.IgnoreSoft:
		// The OS ignores the button.
	default:
		p.schedule(power.StateOff, at.Add(p.cfg.SoftDelay), true)
	}
}
