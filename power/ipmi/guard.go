package ipmi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"
)

// ErrDowngrade is matched (errors.Is) by a *DowngradeError.
var ErrDowngrade = errors.New("ipmi: the BMC negotiated other algorithms than the pinned cipher suite")

// DowngradeError: the BMC's RMCP+ Open Session Response named other
// authentication, integrity or confidentiality algorithms than those of the
// pinned cipher suite. The Open Session exchange is not authenticated, so a
// man in the middle can do this; the session is refused and nothing is sent
// on it.
type DowngradeError struct {
	// Asked is the pinned cipher suite.
	Asked int
	// Offered is the cipher suite whose algorithms the BMC named, or -1 if
	// no suite has them.
	Offered int
	// Auth, Integrity and Confidentiality are the algorithm numbers the
	// BMC named (IPMI v2.0 tables 13-17 to 13-19).
	Auth, Integrity, Confidentiality uint8
}

// Error names the suite asked and the one offered.
func (e *DowngradeError) Error() string {
	offered := "no cipher suite"
	if e.Offered >= 0 {
		offered = "cipher suite " + strconv.Itoa(e.Offered)
	}
	return fmt.Sprintf("ipmi: cipher suite %d was pinned but the BMC offered %s (authentication %s, integrity %s, confidentiality %s): session refused, nothing sent on it",
		e.Asked, offered, types.AuthAlg(e.Auth), types.IntegrityAlg(e.Integrity), types.CryptAlg(e.Confidentiality))
}

// Is reports whether target is ErrDowngrade.
func (e *DowngradeError) Is(target error) bool { return target == ErrDowngrade }

// errMalformedOpenSession: an Open Session Response too short to name its
// algorithms.
var errMalformedOpenSession = errors.New("ipmi: malformed RMCP+ Open Session Response: session refused")

// Offsets in an RMCP+ datagram (IPMI v2.0 sections 13.6 and 13.18): the
// RMCP header (4 bytes), the session header of a session-less RMCP+
// packet (authentication type 06h, payload type, session ID, sequence
// number, payload length: 12 bytes), then the Open Session Response:
// message tag, status code, privilege, reserved, two session IDs, and the
// authentication, integrity and confidentiality payloads (8 bytes each,
// the algorithm in the fifth byte).
const (
	offAuthType       = 4
	offPayloadType    = 5
	offPayloadLength  = 14
	offPayload        = 16
	payloadOpenResp   = 0x11
	openRespStatus    = 1
	openRespAuthAlg   = 16
	openRespIntegAlg  = 24
	openRespCryptAlg  = 32
	openRespMinLength = 36
)

// suiteAlgorithms returns the algorithm numbers of cipher suite id.
func suiteAlgorithms(id int) (auth, integ, crypt uint8, ok bool) {
	a, i, c, ok := types.GetCipherSuiteAlgorithms(types.CipherSuiteID(id))
	return uint8(a), uint8(i), uint8(c), ok
}

// checkOpenSession returns a *DowngradeError if datagram p is an RMCP+
// Open Session Response that names other algorithms than suite asked's,
// errMalformedOpenSession if it is one too short to tell, and nil for
// anything else (a refusal with a status code names no algorithms).
func checkOpenSession(p []byte, asked int) error {
	if len(p) <= offPayloadType || p[offAuthType] != 0x06 || p[offPayloadType]&0x3f != payloadOpenResp {
		return nil
	}
	if len(p) < offPayload {
		return errMalformedOpenSession
	}
	n := int(binary.LittleEndian.Uint16(p[offPayloadLength:]))
	body := p[offPayload:]
	if n < len(body) {
		body = body[:n]
	}
	if len(body) > openRespStatus && body[openRespStatus] != 0 {
		return nil // refused: go-ipmi reports the status
	}
	if len(body) < openRespMinLength {
		return errMalformedOpenSession
	}
	auth, integ, crypt := body[openRespAuthAlg]&0x3f, body[openRespIntegAlg]&0x3f, body[openRespCryptAlg]&0x3f
	wa, wi, wc, ok := suiteAlgorithms(asked)
	if ok && auth == wa && integ == wi && crypt == wc {
		return nil
	}
	offered := -1
	for id := 0; id <= 255; id++ {
		if a, i, c, ok := suiteAlgorithms(id); ok && a == auth && i == integ && c == crypt {
			offered = id
			break
		}
	}
	return &DowngradeError{Asked: asked, Offered: offered, Auth: auth, Integrity: integ, Confidentiality: crypt}
}

// guardConn is the UDP connection go-ipmi talks through: it checks every
// Open Session Response against the pinned suite, and once one fails the
// check it passes nothing more, either way.
type guardConn struct {
	net.Conn
	asked int

	mu     sync.Mutex
	err    error
	resent bool // a session setup message (Open Session, RAKP 1, RAKP 3) went out twice
	sent   [3]int
}

func (g *guardConn) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *guardConn) Read(b []byte) (int, error) {
	if err := g.failure(); err != nil {
		return 0, err
	}
	n, err := g.Conn.Read(b)
	if err != nil {
		return n, err
	}
	if cerr := checkOpenSession(b[:n], g.asked); cerr != nil {
		g.mu.Lock()
		if g.err == nil {
			g.err = cerr
		}
		g.mu.Unlock()
		return 0, cerr
	}
	return n, nil
}

func (g *guardConn) Write(b []byte) (int, error) {
	if err := g.failure(); err != nil {
		return 0, err
	}
	// RMCP (4 bytes), then the session header: authentication type 06h
	// (RMCP+) and the payload type: 10h Open Session Request, 12h RAKP
	// Message 1, 14h RAKP Message 3.
	if len(b) > 5 && b[4] == 0x06 {
		if i := int(b[5]&0x3f) - 0x10; i >= 0 && i <= 4 && i%2 == 0 {
			g.mu.Lock()
			g.sent[i/2]++
			g.resent = g.resent || g.sent[i/2] > 1
			g.mu.Unlock()
		}
	}
	return g.Conn.Write(b)
}

// guardDialer is the dialer go-ipmi is given (client.WithUDPProxy): it
// dials the BMC's address joined properly (IPv6 literals in brackets,
// which go-ipmi's own "%s:%d" does not do) and wraps the connection in a
// guardConn.
type guardDialer struct {
	addr    string
	asked   int
	timeout time.Duration

	mu   sync.Mutex
	conn *guardConn
}

// Dial ignores the address go-ipmi formats and dials d.addr.
func (d *guardDialer) Dial(network, _ string) (net.Conn, error) {
	c, err := net.DialTimeout(network, d.addr, d.timeout)
	if err != nil {
		return nil, err
	}
	g := &guardConn{Conn: c, asked: d.asked}
	d.mu.Lock()
	d.conn = g
	d.mu.Unlock()
	return g, nil
}

// failure returns the check's failure on the connection dialled, if any.
func (d *guardDialer) failure() error {
	d.mu.Lock()
	g := d.conn
	d.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.failure()
}

// resent reports whether a session setup message (Open Session Request,
// RAKP Message 1 or 3) went out more than once on the connection dialled.
func (d *guardDialer) resent() bool {
	d.mu.Lock()
	g := d.conn
	d.mu.Unlock()
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resent
}

// hostPort joins host (an IPv6 literal with or without brackets, an IPv4
// address or a name) and port.
func hostPort(host string, port int) string {
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), strconv.Itoa(port))
}
