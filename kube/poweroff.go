package kube

import (
	"context"
	"errors"
	"fmt"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrPowerOffDisabled: the host has spec.disablePowerOff (its BMC may be
// reachable only while the host runs, NC-SI): rebootkit never powers it
// off, for a reboot request or for spec.online false. It wraps
// power.ErrUnsupported.
var ErrPowerOffDisabled = fmt.Errorf("kube: spec.disablePowerOff is set: %w", power.ErrUnsupported)

// noPowerOff is a host's power controller that refuses every power-off
// (spec.disablePowerOff); readings and power-on go through.
type noPowerOff struct {
	power.Controller
	host string
}

// Off implements power.Controller: always refused, nothing is sent.
func (n noPowerOff) Off(context.Context, power.Mode) error {
	return fmt.Errorf("%w: host %s is never powered off by rebootkit; a reboot of it is a reset, "+
		"asked for with the bare %s annotation; or clear spec.disablePowerOff", ErrPowerOffDisabled, n.host, reboot.Annotation)
}

// TogglesOff passes on the wrapped controller's reboot.Toggler. No
// power-off is ever sent through it, but a wrapper says what the
// controller it wraps would do (TestWrappersForwardExtensions).
func (n noPowerOff) TogglesOff(m power.Mode) bool { return togglesOff(n.Controller, m) }

// TogglesOn passes on the wrapped controller's reboot.OnToggler.
func (n noPowerOff) TogglesOn() bool { return togglesOn(n.Controller) }

func isPowerOffDisabled(err error) bool { return errors.Is(err, ErrPowerOffDisabled) }

// Reset passes the restart without a power-off on to the host's
// controller (power.Resetter): it is how such a host is rebooted.
func (n noPowerOff) Reset(ctx context.Context) error { return resetOf(ctx, n.Controller) }

// ReadTask passes the reading of a task monitor on to the host's
// controller (power.TaskReader): a read, never a power-off.
func (n noPowerOff) ReadTask(ctx context.Context, monitor string) (power.TaskReading, error) {
	tr, ok := n.Controller.(power.TaskReader)
	if !ok {
		return power.TaskNotEnded, &power.Error{Op: "task", Class: power.ClassUnsupported, Message: "the host's power controller cannot read a task monitor"}
	}
	return tr.ReadTask(ctx, monitor)
}

// OnChecked passes the checked power-on on to the host's controller
// (power.CheckedOner).
func (n noPowerOff) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return onCheckedOf(ctx, n.Controller, check)
}

// onCheckedOf is pc's OnChecked, or an error matching
// power.ErrUnsupported (and power.ErrNotSent) if pc has none.
func onCheckedOf(ctx context.Context, pc power.Controller, check func(context.Context) error) error {
	o, ok := pc.(power.CheckedOner)
	if !ok {
		return &power.Error{Op: "on", Class: power.ClassUnsupported, Message: "the host's power controller cannot check before a power-on",
			Err: power.ErrNotSent}
	}
	return o.OnChecked(ctx, check)
}

// resetOf is pc's Reset, or an error matching power.ErrUnsupported if pc
// cannot reset.
func resetOf(ctx context.Context, pc power.Controller) error {
	r, ok := pc.(power.Resetter)
	if !ok {
		return &power.Error{Op: "reset", Class: power.ClassUnsupported, Message: "the host's power controller cannot reset"}
	}
	return r.Reset(ctx)
}
