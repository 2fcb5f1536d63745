package ipmi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrDowngrade is matched (errors.Is) by a *DowngradeError.
var ErrDowngrade = errors.New("ipmi: the BMC negotiated other algorithms than the pinned cipher suite")

// DowngradeError: the answer to the RMCP+ Open Session Request named
// other authentication, integrity or confidentiality algorithms than those
// of the pinned cipher suite, or was not an RMCP+ Open Session Response at
// all (another payload type, IPMI v1.5 framing). The Open Session exchange
// is not authenticated, so a man in the middle can do this; the session is
// refused and nothing more is sent.
type DowngradeError struct {
	// Asked is the pinned cipher suite.
	Asked int
	// Offered is the cipher suite whose algorithms the BMC named, or -1 if
	// no suite has them or the answer named none.
	Offered int
	// Auth, Integrity and Confidentiality are the algorithm numbers the
	// BMC named (IPMI v2.0 tables 13-17 to 13-19); 0 when Reason is set.
	Auth, Integrity, Confidentiality uint8
	// Reason says what the answer was when it was no Open Session
	// Response ("IPMI v1.5 framing", "payload type 0x13"); empty
	// otherwise.
	Reason string
}

// Error names the suite asked and the one offered.
func (e *DowngradeError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("ipmi: cipher suite %d was pinned but the answer to Open Session was %s, not an RMCP+ Open Session Response: session refused, nothing sent on it",
			e.Asked, e.Reason)
	}
	offered := "no cipher suite"
	if e.Offered >= 0 {
		offered = "cipher suite " + strconv.Itoa(e.Offered)
	}
	return fmt.Sprintf("ipmi: cipher suite %d was pinned but the BMC offered %s (authentication %s, integrity %s, confidentiality %s): session refused, nothing sent on it",
		e.Asked, offered, authName(e.Auth), integName(e.Integrity), cryptName(e.Confidentiality))
}

// Is reports whether target is ErrDowngrade.
func (e *DowngradeError) Is(target error) bool { return target == ErrDowngrade }

// ErrProtocol is matched (errors.Is) by a *ProtocolError.
var ErrProtocol = errors.New("ipmi: the BMC's answer broke the IPMI v2.0 protocol")

// ProtocolError: an answer in the session setup was malformed (truncated,
// a wrong length, an answer to another request or session). The setup
// stops at once: nothing more is sent.
type ProtocolError struct {
	// Step is the request answered: "Open Session", "RAKP 1", "RAKP 3".
	Step string
	// Reason says what was wrong.
	Reason string
}

// Error names the step and what was wrong.
func (e *ProtocolError) Error() string {
	return "ipmi: malformed answer to " + e.Step + " (" + e.Reason + "): session refused"
}

// Is reports whether target is ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// Offsets in an Open Session Response body (IPMI v2.0 table 13-10):
// message tag, status code, privilege, reserved, the console's session
// ID, the BMC's session ID, and the authentication, integrity and
// confidentiality payloads (8 bytes each: payload type, reserved, length,
// algorithm, reserved).
const (
	openRespTag       = 0
	openRespStatus    = 1
	openRespConsoleID = 4
	openRespBMCID     = 8
	openRespAuthAlg   = 16
	openRespIntegAlg  = 24
	openRespCryptAlg  = 32
	openRespMinLength = 36
)

// checkOpenSession checks p, the first datagram after an Open Session
// Request with message tag tag and console session ID consoleID, against
// suite st, and returns the BMC's session ID. Anything but an RMCP+ Open
// Session Response for that request naming st's algorithms is an error: a
// *DowngradeError (other algorithms, another payload type, IPMI v1.5
// framing), a *RefusedError (a status code), or a *ProtocolError.
func checkOpenSession(p []byte, tag uint8, consoleID uint32, st suite) (uint32, error) {
	bad := func(format string, args ...any) error {
		return &ProtocolError{Step: "Open Session", Reason: fmt.Sprintf(format, args...)}
	}
	if len(p) < 6 || !isRMCP(p) {
		return 0, bad("not an RMCP datagram, %d bytes", len(p))
	}
	if p[4] != authTypeRMCPPlus {
		return 0, &DowngradeError{Asked: st.id, Offered: -1,
			Reason: fmt.Sprintf("an IPMI v1.5 packet (authentication type %#02x)", p[4])}
	}
	if p[5] != ptOpenResponse {
		return 0, &DowngradeError{Asked: st.id, Offered: -1,
			Reason: fmt.Sprintf("payload type %#02x", p[5])}
	}
	body, err := sessionlessPayload(p, ptOpenResponse)
	if err != nil {
		return 0, bad("%v", err)
	}
	if len(body) < 2 {
		return 0, bad("truncated, %d bytes", len(body))
	}
	if body[openRespTag] != tag {
		return 0, bad("an answer to another request (message tag %d, not %d)", body[openRespTag], tag)
	}
	if body[openRespStatus] != 0 {
		return 0, &RefusedError{Step: "Open Session", Status: body[openRespStatus], Suite: st.id}
	}
	if len(body) < openRespMinLength {
		return 0, bad("truncated, %d bytes", len(body))
	}
	if id := binary.LittleEndian.Uint32(body[openRespConsoleID:]); id != consoleID {
		return 0, bad("an answer for another session")
	}
	for i, typ := range []int{openRespAuthAlg, openRespIntegAlg, openRespCryptAlg} {
		if body[typ-4] != uint8(i) || body[typ-1] != 8 {
			return 0, bad("algorithm payload %d malformed", i)
		}
	}
	auth, integ, crypt := body[openRespAuthAlg]&0x3f, body[openRespIntegAlg]&0x3f, body[openRespCryptAlg]&0x3f
	if auth != st.auth || integ != st.integ || crypt != st.crypt {
		return 0, &DowngradeError{Asked: st.id, Offered: suiteOf(auth, integ, crypt), Auth: auth, Integrity: integ, Confidentiality: crypt}
	}
	bmcID := binary.LittleEndian.Uint32(body[openRespBMCID:])
	if bmcID == 0 {
		return 0, bad("session ID 0")
	}
	return bmcID, nil
}

// ErrRefused is matched (errors.Is) by a *RefusedError.
var ErrRefused = errors.New("ipmi: the BMC refused the session")

// RefusedError: the BMC answered Open Session, RAKP 1 or RAKP 3 with a
// non-zero RMCP+ status code (IPMI v2.0 table 13-15). Those answers are
// not authenticated: a man in the middle can send one too.
type RefusedError struct {
	// Step is the request refused: "Open Session", "RAKP 1" (in RAKP 2)
	// or "RAKP 3" (in RAKP 4).
	Step string
	// Status is the RMCP+ status code.
	Status uint8
	// Suite is the pinned cipher suite.
	Suite int
	// Offered are the cipher suites the BMC lists (Get Channel Cipher
	// Suites) when it refused the suite; nil if it was not asked or did
	// not answer.
	Offered []int
}

// rmcpStatus names the RMCP+ status codes (IPMI v2.0 table 13-15).
var rmcpStatus = map[uint8]string{
	0x01: "insufficient resources to create a session",
	0x02: "invalid session ID",
	0x03: "invalid payload type",
	0x04: "invalid authentication algorithm",
	0x05: "invalid integrity algorithm",
	0x06: "no matching authentication payload",
	0x07: "no matching integrity payload",
	0x08: "inactive session ID",
	0x09: "invalid role",
	0x0a: "unauthorized role or privilege level requested",
	0x0b: "insufficient resources to create a session at the requested role",
	0x0c: "invalid name length",
	0x0d: "unauthorized name",
	0x0e: "unauthorized GUID",
	0x0f: "invalid integrity check value",
	0x10: "invalid confidentiality algorithm",
	0x11: "no cipher suite match with the proposed security algorithms",
	0x12: "illegal or unrecognized parameter",
}

// refusalKind sorts the status codes by what fixes them.
func refusalKind(s uint8) string {
	switch s {
	case 0x01, 0x0b:
		return "resources"
	case 0x02, 0x08:
		return "session"
	case 0x04, 0x05, 0x06, 0x07, 0x10, 0x11:
		return "suite"
	case 0x09, 0x0a, 0x0c, 0x0d, 0x0e, 0x0f:
		return "auth"
	}
	return "other"
}

// StatusName returns the name of the status code.
func (e *RefusedError) StatusName() string {
	if n, ok := rmcpStatus[e.Status]; ok {
		return n
	}
	return "reserved status"
}

// Fix says what the operator can do about it.
func (e *RefusedError) Fix() string {
	switch refusalKind(e.Status) {
	case "resources":
		return "the BMC has no free session slot: close other sessions (ipmitool, consoles) or wait for them to time out, and try again"
	case "session":
		return "the BMC dropped the session while it was set up: try again"
	case "suite":
		if len(e.Offered) > 0 {
			s := make([]string, len(e.Offered))
			var usable []string
			for i, id := range e.Offered {
				s[i] = strconv.Itoa(id)
				if _, ok := suites[id]; ok && id != e.Suite {
					usable = append(usable, s[i])
				}
			}
			fix := "enable cipher suite 3 or 17 on the BMC"
			if len(usable) > 0 {
				fix = "pin cipher suite " + strings.Join(usable, " or ")
			}
			return fmt.Sprintf("the BMC does not run cipher suite %d; it lists %s (unauthenticated answer): %s",
				e.Suite, strings.Join(s, ", "), fix)
		}
		return fmt.Sprintf("the BMC does not run cipher suite %d: pin the other of 3 and 17, or enable it on the BMC (ipmitool channel getciphers ipmi lists them)", e.Suite)
	case "auth":
		return "check the user name, the password and that the account may log in at the privilege asked (Config.Privilege)"
	}
	return "the BMC's IPMI implementation did not accept the request"
}

// Error names the step, the status code and the fix.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("ipmi: the BMC refused %s with RMCP+ status %#02x (%s): %s", e.Step, e.Status, e.StatusName(), e.Fix())
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// auth reports whether the status refuses the account.
func (e *RefusedError) auth() bool { return refusalKind(e.Status) == "auth" }

// busy reports whether trying again later may help.
func (e *RefusedError) busy() bool {
	k := refusalKind(e.Status)
	return k == "resources" || k == "session"
}
