package power

import (
	"context"
	"fmt"
)

// State is the power state of a server as its controller reports it.
//
// The zero value is StateUnknown: nothing is known, and no decision may treat
// an unknown state as off.
type State int

const (
	// StateUnknown means the controller could not tell (or was not asked).
	StateUnknown State = iota
	// StateOn means the server is powered on.
	StateOn
	// StateOff means the server is powered off: no process runs on it.
	StateOff
	// StateTransitioning means a power change is under way (Redfish
	// PoweringOn / PoweringOff). It is neither on nor off for any decision.
	StateTransitioning
)

// String returns "unknown", "on", "off" or "transitioning".
func (s State) String() string {
	switch s {
	case StateUnknown:
		return "unknown"
	case StateOn:
		return "on"
	case StateOff:
		return "off"
	case StateTransitioning:
		return "transitioning"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Mode says how a server is powered off.
//
// The zero value is ModeSoft, the default of the reboot API.
type Mode int

const (
	// ModeSoft asks the operating system to shut down (ACPI power button,
	// Redfish GracefulShutdown). The OS may take long or ignore it.
	ModeSoft Mode = iota
	// ModeHard cuts the power at once (Redfish ForceOff).
	ModeHard
)

// String returns "soft" or "hard".
func (m Mode) String() string {
	switch m {
	case ModeSoft:
		return "soft"
	case ModeHard:
		return "hard"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// ParseMode parses "soft" or "hard" (exact, lower case). Anything else
// returns an error wrapping ErrUnknownMode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "soft":
		return ModeSoft, nil
	case "hard":
		return ModeHard, nil
	}
	return ModeSoft, fmt.Errorf("power: mode %q: %w", s, ErrUnknownMode)
}

// Controller controls the power of one server.
//
// Every method must be safe to call again with the same arguments: asking
// for the state the server is already in (or already moving to) succeeds and
// changes nothing. A method returns once the controller has accepted the
// command; the power state changes some time later, and callers learn of it
// only through State. Errors should match one of the classes below with
// errors.Is (ErrUnsupported, ErrBusy, ErrFailed); an error that matches none
// counts as ErrFailed. Errors must never contain credentials.
type Controller interface {
	// State reports the current power state. An error means the state is
	// unknown; the caller must not assume on or off.
	State(ctx context.Context) (State, error)
	// On powers the server on. Powering on a server that is on succeeds.
	On(ctx context.Context) error
	// Off powers the server off in the given mode. Powering off a server
	// that is off succeeds. A hard Off while a soft Off is under way
	// escalates it. ErrUnsupported means this mode is not available on this
	// server (callers fall back from soft to hard).
	Off(ctx context.Context, mode Mode) error
}

// Resetter is an optional interface of a Controller that can restart a
// running server without powering it off: a hard reset (Redfish
// ForceRestart, IPMI Chassis Control hard reset). The power never reads
// Off, so a reset is no evidence that a server was off: nothing may take
// it for fencing. It is what a host whose power must never go off
// (metal3's spec.disablePowerOff: a BMC reached through the host's own
// network port, NC-SI) is rebooted with.
type Resetter interface {
	// Reset restarts the server at once. It is sent only to a server that
	// a fresh read shows On (a reset of a server that is off powers it on
	// on some BMCs, and does nothing on others): any other read fails
	// with an error matching ErrBusy and sends nothing. ErrUnsupported
	// means the controller cannot reset this server. A nil error means
	// the BMC accepted the reset; a timeout (ErrBusy wrapping
	// context.DeadlineExceeded) may or may not have reset it.
	Reset(ctx context.Context) error
}

// CheckedOner is an optional interface of a Controller whose power-on
// can be made conditional on a check run after the BMC's last answer
// before the command: a caller whose reason to power a server on may
// lapse while the BMC is slow to answer (a read, a login) checks it
// there, not before the call, so that no answer it waits on lies between
// its check and the command.
type CheckedOner interface {
	// OnChecked powers the server on as On does (the same reads, the
	// same rules), but calls check just before the power-on command is
	// sent, after every request On makes before it: no answer of the
	// BMC's lies between check and the command (what callers rely on:
	// a reason to power on that lapsed while the BMC was slow to answer
	// is seen). A command sent again after an answer is awaited (a
	// session the BMC refused, or, for IPMI, one that lost the command's
	// answer or the state read's, is opened again and the command sent
	// on it) has check called again, after that login and just before
	// it: check may be called more than once. If check returns an error,
	// that command is not sent; OnChecked returns an error wrapping it
	// and ErrNotSent if no command went out before (a 401 applied
	// nothing), else one that does not match ErrNotSent (an IPMI command
	// whose answer was lost may have been carried out). check is not
	// called when On sends nothing (the server reads On, or the adapter's
	// rules refuse the command). check gets the call's context: its
	// deadline is the latest instant the command may be sent, and check
	// may persist it before returning.
	OnChecked(ctx context.Context, check func(context.Context) error) error
}

// CheckRefused is the error of a power-on OnChecked did not send because
// its check returned err: of class failed, wrapping ErrNotSent and err.
func CheckRefused(op string, err error) error {
	return &Error{Op: op, Class: ClassFailed, Message: "not sent: its check refused it", Err: fmt.Errorf("%w: %w", ErrNotSent, err)}
}
