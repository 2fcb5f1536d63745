package power

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Controllers wrap them (directly or through *Error) so that
// callers can classify an outcome with errors.Is or with Classify.
var (
	// ErrUnsupported: the controller cannot do this operation (for
	// example no soft shutdown). Retrying will not help; a soft power-off
	// falls back to hard at once.
	ErrUnsupported = errors.New("power: operation not supported")
	// ErrBusy: the controller refused for now (HTTP 409/503, another
	// operation under way). Retry after a delay.
	ErrBusy = errors.New("power: controller busy")
	// ErrFailed: the operation failed for another reason. A soft power-off
	// that failed escalates to hard.
	ErrFailed = errors.New("power: operation failed")
	// ErrAuth: the BMC refused the credentials (a wrong username or
	// password, an account without the privilege asked, a locked account).
	// Errors that match it are of class ClassFailed as well: retrying soon
	// will not help, and BMCs lock accounts after a few failed logins, so
	// a Pool backs off hardest after it. The adapters wrap it in a *Error
	// (Err: ErrAuth).
	ErrAuth = errors.New("power: authentication failed")
	// ErrSystemRefused: the BMC refused a request for the host's own
	// system (HTTP 401: an account without rights on one blade) while it
	// answered the same credentials on a resource that does not depend on
	// that system (power/redfish with BasicAuth reads the SessionService
	// after such a 401). It is the host's own refusal, not the
	// credentials': it does not match ErrAuth, and a Pool backs that host
	// alone off (AuthBackoff doubling up to MaxAuthBackoff, as after a
	// refused login), keeping the session and the credentials for the
	// other hosts. Of class ClassFailed. A Connect error marks it
	// AfterLogin as well.
	ErrSystemRefused = errors.New("power: the BMC refuses this system to credentials it accepts")
	// ErrNoSystem: the BMC accepted the login, and its authenticated
	// answer says the system asked for is not there (a blade pulled, a
	// wrong system ID, several systems and none named). It is the host's
	// own configuration, not the login's: a Pool counts the login as
	// successful and backs no login off for it (the neighbours behind the
	// same BMC and credentials go on). Class failed. An adapter wraps it
	// only after an answer that proves the credentials; a lookup that
	// timed out or was refused is not ErrNoSystem.
	ErrNoSystem = errors.New("power: no such system on the BMC")
	// ErrAfterLogin is matched by a Connect error that came after the BMC
	// accepted the login (AfterLogin): a request for the host's own system
	// (power/redfish: its resource, its member of the Systems listing, its
	// ActionInfo) failed or was refused, or answered what the adapter
	// cannot use (a blade whose management path is broken behind a chassis
	// manager that serves the others). A failure of the whole service (its
	// root or Systems collection busy, failing or timing out) is not
	// marked so: it is the login's. Like ErrNoSystem, it is the host's own
	// failure, not the login's: a Pool counts the login as successful and
	// backs that host alone off. An error that also matches ErrAuth is the
	// login's (power/redfish never marks one so: a refusal of a request
	// for the host's own system after an accepted login is the host's).
	ErrAfterLogin = errors.New("power: failed after the BMC accepted the login")
	// ErrUnanswered is matched by a Connect error (Unanswered) of an
	// adapter that sends the credentials with every request
	// (power/redfish with BasicAuth) when the BMC answered none of the
	// requests it sent with them (each ran out of time, having had at
	// least as long as the BMC took to answer the login): a refusal of the
	// credentials the BMC holds back (a failed-login delay, IP blocking)
	// looks so, and so does a dead system behind a service that hangs as
	// well. A Pool counts it against the login, as an authentication
	// failure (AuthBackoff, shared by the login's hosts: a BMC with a wrong
	// password it does not answer sees at most two tries a minute), unless
	// a request with the same credentials was answered within the last
	// LoginInterval (another host's call or Connect): then it is the
	// host's own, backing that host alone off. It is not ErrAuth.
	ErrUnanswered = errors.New("power: the BMC answered no request made with the credentials")
	// ErrUnknownMode is returned by ParseMode for anything but soft or hard.
	ErrUnknownMode = errors.New("unknown power mode")
)

// Class is the class of a power call's outcome that decisions act on.
//
// The zero value, ClassNone, means the call succeeded (or no call was made).
type Class int

const (
	// ClassNone: success, or no call.
	ClassNone Class = iota
	// ClassUnsupported: see ErrUnsupported.
	ClassUnsupported
	// ClassBusy: see ErrBusy. Timeouts (context.DeadlineExceeded) are busy
	// too: the command may or may not have taken effect, so the caller reads
	// the state again later and retries if it is still needed.
	ClassBusy
	// ClassFailed: see ErrFailed, and every error that matches no class.
	ClassFailed
)

// String returns "none", "unsupported", "busy" or "failed".
func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassUnsupported:
		return "unsupported"
	case ClassBusy:
		return "busy"
	case ClassFailed:
		return "failed"
	default:
		return fmt.Sprintf("Class(%d)", int(c))
	}
}

// Classify returns the class of err: ClassNone for nil, the class of the
// first sentinel it matches, ClassBusy for context.DeadlineExceeded, and
// ClassFailed for everything else (context.Canceled included: the caller
// gave up, the controller did not say busy).
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrUnsupported):
		return ClassUnsupported
	case errors.Is(err, ErrBusy):
		return ClassBusy
	case errors.Is(err, ErrFailed):
		return ClassFailed
	case errors.Is(err, context.DeadlineExceeded):
		return ClassBusy
	default:
		return ClassFailed
	}
}

// Error is a classified failure of one power operation, with what the
// controller said. It matches its class's sentinel with errors.Is, and the
// underlying cause (if any) through Unwrap.
type Error struct {
	// Op is the operation: "state", "on", "off soft", "off hard" or
	// "reset".
	Op string
	// Class is the outcome class; never ClassNone.
	Class Class
	// Status is the protocol status (an HTTP status code for Redfish, the
	// completion code for IPMI), 0 if none.
	Status int
	// Message is what the controller said, without credentials.
	Message string
	// Err is the underlying error, may be nil.
	Err error
}

// Error formats the operation, status and message.
func (e *Error) Error() string {
	s := "power: " + e.Op + ": " + e.Class.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Answered reports whether e carries the BMC's answer to the call: a
// protocol status that says what became of it. No status (a timeout, a
// broken connection, a lost datagram) is no answer, and neither is a
// status that says the BMC, or a gateway in front of it, has no outcome
// for the call, which may still be carried out: IPMI completion codes C3h
// ("timeout while processing command, response unavailable") and CEh
// ("command response could not be provided"), HTTP 502 Bad Gateway and
// 504 Gateway Timeout (the two numbering spaces do not meet: no HTTP
// error is 195 or 206, no completion code is above 255). Such a call may
// land late (assumption A5 of package reboot).
func (e *Error) Answered() bool {
	switch e.Status {
	case 0, 0xc3, 0xce, 502, 504:
		return false
	}
	return true
}

// Is reports whether target is the sentinel of e's class.
func (e *Error) Is(target error) bool {
	switch e.Class {
	case ClassUnsupported:
		return target == ErrUnsupported
	case ClassBusy:
		return target == ErrBusy
	case ClassFailed:
		return target == ErrFailed
	}
	return false
}

// OpName returns the Error.Op name of a power-off in mode m.
func OpName(m Mode) string { return "off " + m.String() }

// AfterLogin returns err (nil if nil) marked as a failure that came after
// the BMC accepted the login: it matches ErrAfterLogin and everything err
// matches, and reads as err.
func AfterLogin(err error) error {
	if err == nil {
		return nil
	}
	return afterLogin{err: err}
}

// Unanswered returns err (nil if nil) marked as a Connect failure in
// which the BMC answered no request sent with the credentials: it matches
// ErrUnanswered and everything err matches, and reads as err.
func Unanswered(err error) error {
	if err == nil {
		return nil
	}
	return unanswered{err: err}
}

type unanswered struct{ err error }

func (e unanswered) Error() string { return e.err.Error() }

func (e unanswered) Unwrap() []error { return []error{e.err, ErrUnanswered} }

// AfterLoginKeep is AfterLogin, handing over session, the controller of
// the session the login opened, still logged in, to a Pool that asked for
// it (ConnectInfo.KeepSession): the Pool keeps it as the shared session of
// the login, which the host's neighbours join without a login of their
// own, and closes it once idle. session must not be nil; the error a Pool
// returns no longer carries it.
func AfterLoginKeep(err error, session Controller) error {
	if err == nil {
		return nil
	}
	return afterLogin{err: err, session: session}
}

type afterLogin struct {
	err     error
	session Controller // AfterLoginKeep's, or nil
}

// keptSession returns the session err hands over (AfterLoginKeep), or
// nil, and err without it.
func keptSession(err error) (Controller, error) {
	if al, ok := err.(afterLogin); ok && al.session != nil {
		return al.session, afterLogin{err: al.err}
	}
	return nil, err
}

func (e afterLogin) Error() string { return e.err.Error() }

func (e afterLogin) Unwrap() []error { return []error{e.err, ErrAfterLogin} }

// hostsOwn reports whether a Connect failure is the host's own rather
// than its login's: it came after the BMC accepted the login (ErrNoSystem,
// ErrAfterLogin), and is no refusal of the credentials.
func hostsOwn(err error) bool {
	return (errors.Is(err, ErrNoSystem) || errors.Is(err, ErrAfterLogin)) && !errors.Is(err, ErrAuth)
}
