package ipmi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// errNoAnswer: no datagram that this exchange accepts came back in time.
var errNoAnswer = errors.New("no valid answer from the BMC")

// link is one UDP socket to the BMC, used by one goroutine at a time: the
// operation holding the Controller's lock. Nothing else sends on it (no
// keep-alive): one session has one sender.
type link struct {
	conn    net.Conn
	timeout time.Duration
	retries int
	// sent counts datagrams sent; dropped those received and refused,
	// lastDrop why the last one was.
	sent, dropped int
	lastDrop      error
	buf           []byte
}

func dialLink(ctx context.Context, addr string, timeout time.Duration, retries int) (*link, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	return &link{conn: conn, timeout: timeout, retries: retries, buf: make([]byte, 1024)}, nil
}

func (l *link) close() { _ = l.conn.Close() }

// roundTrip sends the datagram next returns, then hands every datagram
// received to accept until accept returns true or an error; after each
// Timeout without that it calls next again, Retries times, and sends what
// it returns; a nil datagram sends nothing and waits one more Timeout, so
// the step's time is (Retries+1)×Timeout from the first send whatever
// arrives. accept returning (false, nil) drops the datagram. It returns
// how many datagrams went out. A done ctx ends the wait at once.
func (l *link) roundTrip(ctx context.Context, step string, next func() ([]byte, error), accept func([]byte) (bool, error)) (int, error) {
	// A done ctx ends the wait at once; the deadline it sets must land
	// before roundTrip returns, never under the next exchange's read.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = l.conn.SetReadDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-fired
		}
	}()
	dropped, sent := l.dropped, 0
	var end time.Time // the end of the try under way
	for try := 0; try <= l.retries; try++ {
		if err := ctx.Err(); err != nil {
			return sent, fmt.Errorf("%s: %w", step, err)
		}
		p, err := next()
		if err != nil {
			return sent, err
		}
		if p != nil {
			if _, err := l.conn.Write(p); err != nil {
				return sent, fmt.Errorf("%s: %w", step, err)
			}
			l.sent++
			sent++
			end = time.Now().Add(l.timeout)
		} else {
			// Nothing sent: the wait goes on one Timeout from the end
			// of the last try, not from now.
			end = end.Add(l.timeout)
		}
		deadline := end
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := l.conn.SetReadDeadline(deadline); err != nil {
			return sent, err
		}
		if ctx.Err() != nil { // the AfterFunc ran before this deadline was set
			_ = l.conn.SetReadDeadline(time.Unix(1, 0))
		}
		for {
			n, err := l.conn.Read(l.buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				// ICMP port unreachable and the like: wait out the
				// timeout as for a lost answer.
				if errors.Is(err, net.ErrClosed) {
					return sent, fmt.Errorf("%s: %w", step, err)
				}
				if time.Now().Before(deadline) {
					continue
				}
				break
			}
			ok, err := accept(l.buf[:n])
			if err != nil {
				return sent, err
			}
			if ok {
				return sent, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return sent, fmt.Errorf("%s: %w", step, err)
	}
	if l.dropped > dropped {
		return sent, fmt.Errorf("%s: %w after %d tries, %d sent (%d datagrams refused, the last: %v)", step, errNoAnswer, l.retries+1, sent, l.dropped-dropped, l.lastDrop)
	}
	return sent, fmt.Errorf("%s: %w after %d tries, %d sent", step, errNoAnswer, l.retries+1, sent)
}

// drop counts a refused datagram.
func (l *link) drop(why error) {
	l.dropped++
	l.lastDrop = why
}

// session is an active RMCP+ session.
type session struct {
	*link
	keys
	rqSeq uint8
	// lastAnswer is when the session last took an answer.
	lastAnswer time.Time
}

// completionError is a non-zero IPMI completion code.
type completionError uint8

func (e completionError) Error() string {
	return fmt.Sprintf("completion code %#02x (%s)", uint8(e), completionName(uint8(e)))
}

// command sends IPMI request (netFn, cmd, data) on the session and
// returns the answer's data. A non-zero completion code is a
// completionError; only an answer that opens with this session's keys and
// matches the request is taken. A retransmit carries the same request
// (the same IPMI sequence number) in a new packet.
func (s *session) command(ctx context.Context, netFn, cmd uint8, data []byte) ([]byte, error) {
	return s.exchange(ctx, netFn, cmd, data, true)
}

// commandOnce is command without a retransmit: the request goes out once
// and its answer is waited for as long as command's tries take. For a
// request that must not be applied twice (a soft shutdown may be a press
// of the power button): a lost answer is an error, and the caller reads
// the state before it sends again.
func (s *session) commandOnce(ctx context.Context, netFn, cmd uint8, data []byte) ([]byte, error) {
	return s.exchange(ctx, netFn, cmd, data, false)
}

func (s *session) exchange(ctx context.Context, netFn, cmd uint8, data []byte, resend bool) ([]byte, error) {
	s.rqSeq = (s.rqSeq + 1) & 0x3f
	rq := s.rqSeq
	msg := ipmiRequest(netFn, cmd, rq, data)
	var out []byte
	var code uint8
	sent := false
	next := func() ([]byte, error) {
		if sent && !resend {
			return nil, nil
		}
		sent = true
		return s.seal(msg)
	}
	_, err := s.roundTrip(ctx, fmt.Sprintf("command %#02x/%#02x", netFn, cmd), next,
		func(p []byte) (bool, error) {
			m, err := s.open(p)
			if err != nil {
				s.drop(err)
				return false, nil
			}
			cc, d, err := parseResponse(m, netFn, cmd, rq)
			if err != nil {
				// Authentic, but the answer to an earlier request (a
				// retransmit's second answer): not this one's.
				s.drop(err)
				return false, nil
			}
			code, out = cc, append([]byte(nil), d...)
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	s.lastAnswer = time.Now()
	if code != 0 {
		return nil, completionError(code)
	}
	return out, nil
}

// abandon sends Close Session once without waiting for the answer, and
// closes the socket: for a session that lost an answer or sat idle, whose
// BMC may not answer any more.
func (s *session) abandon() {
	defer s.close()
	s.rqSeq = (s.rqSeq + 1) & 0x3f
	if p, err := s.seal(ipmiRequest(netFnApp, cmdCloseSess, s.rqSeq, binary.LittleEndian.AppendUint32(nil, s.bmcID))); err == nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
		if _, err := s.conn.Write(p); err == nil {
			s.sent++
		}
	}
}

// closeSession sends Close Session once and waits at most one Timeout for
// its answer; the socket is closed either way.
func (s *session) closeSession(ctx context.Context) error {
	defer s.close()
	s.retries = 0
	_, err := s.command(ctx, netFnApp, cmdCloseSess, binary.LittleEndian.AppendUint32(nil, s.bmcID))
	return err
}

// Privilege levels (IPMI v2.0 table 22-24).
const (
	privOperator      = 0x03
	privAdministrator = 0x04
	// roleNameOnly: RAKP 1's name-only lookup bit (table 13-11).
	roleNameOnly = 0x10
)

// kuid is the password as the RAKP key: its bytes, zero-padded to 20
// (IPMI v2.0 section 13.31). HMAC pads keys with zeros anyway.
func kuid(password string) []byte {
	k := make([]byte, maxPassword)
	copy(k, password)
	return k
}

func hmacOf(st suite, key []byte, parts ...[]byte) []byte {
	h := hmac.New(st.hash, key)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// setup is one session setup in progress.
type setup struct {
	cfg  Config
	st   suite
	link *link
	// resent: Open Session, RAKP 1 or RAKP 3 went out more than once.
	resent bool
	// step is the request under way: "Open Session", "RAKP 1", "RAKP 3"
	// or "privilege".
	step string
}

// randomID returns a random non-zero session ID.
func randomID() (uint32, error) {
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if id := binary.LittleEndian.Uint32(b[:]); id != 0 {
			return id, nil
		}
	}
}

// open runs Open Session, RAKP 1 to 4 and Set Session Privilege Level
// (IPMI v2.0 section 13.15) and returns the active session.
func (su *setup) open(ctx context.Context) (*session, error) {
	st, l := su.st, su.link
	priv := uint8(privAdministrator)
	if su.cfg.Privilege == PrivilegeOperator {
		priv = privOperator
	}
	consoleID, err := randomID()
	if err != nil {
		return nil, err
	}

	// Open Session Request (table 13-9): tag, privilege, reserved, the
	// console's session ID, and the three algorithm payloads.
	const openTag = 0
	req := []byte{openTag, priv, 0, 0}
	req = binary.LittleEndian.AppendUint32(req, consoleID)
	req = append(req, 0x00, 0, 0, 8, st.auth, 0, 0, 0)
	req = append(req, 0x01, 0, 0, 8, st.integ, 0, 0, 0)
	req = append(req, 0x02, 0, 0, 8, st.crypt, 0, 0, 0)
	openPkt := sessionless(ptOpenRequest, req)
	su.step = "Open Session"
	var bmcID uint32
	n, err := l.roundTrip(ctx, "Open Session", func() ([]byte, error) { return openPkt, nil }, func(p []byte) (bool, error) {
		// The first datagram after the request must be its answer, with
		// the pinned algorithms: anything else ends the setup before
		// another datagram goes out.
		id, err := checkOpenSession(p, openTag, consoleID, st)
		bmcID = id
		return err == nil, err
	})
	su.resent = su.resent || n > 1
	if err != nil {
		return nil, err
	}

	// RAKP Message 1 (table 13-11): tag, reserved, the BMC's session ID,
	// the console's random, role, reserved, user name.
	const rakp1Tag = 1
	var rm [16]byte
	if _, err := rand.Read(rm[:]); err != nil {
		return nil, err
	}
	role := roleNameOnly | priv
	name := []byte(su.cfg.Username)
	r1 := []byte{rakp1Tag, 0, 0, 0}
	r1 = binary.LittleEndian.AppendUint32(r1, bmcID)
	r1 = append(r1, rm[:]...)
	r1 = append(r1, role, 0, 0, uint8(len(name)))
	r1 = append(r1, name...)
	rakp1 := sessionless(ptRAKP1, r1)
	su.step = "RAKP 1"
	var rc, guid [16]byte
	key := kuid(su.cfg.Password)
	authLen := st.hash().Size()
	var v2 pending
	n, err = l.roundTrip(ctx, "RAKP 1", v2.resend(rakp1), func(p []byte) (bool, error) {
		body, err := sessionlessPayload(p, ptRAKP2)
		if err != nil || len(body) < 8 || body[0] != rakp1Tag || binary.LittleEndian.Uint32(body[4:]) != consoleID {
			// A late answer to Open Session (a retransmit's), or noise.
			l.drop(fmt.Errorf("not the RAKP 2 of this setup: %v", err))
			return false, nil
		}
		if body[1] != 0 {
			return v2.note(l, &RefusedError{Step: "RAKP 1", Status: body[1], Suite: st.id})
		}
		// RAKP 2 (table 13-12): tag, status, reserved, the console's
		// session ID, the BMC's random, its GUID, and the key exchange
		// authentication code over both IDs, both randoms, the GUID,
		// the role and the user name.
		if len(body) < 40+authLen {
			return v2.note(l, &ProtocolError{Step: "RAKP 1", Reason: fmt.Sprintf("RAKP 2 truncated, %d bytes", len(body))})
		}
		copy(rc[:], body[8:24])
		copy(guid[:], body[24:40])
		want := hmacOf(st, key, le32(consoleID), le32(bmcID), rm[:], rc[:], guid[:], []byte{role, uint8(len(name))}, name)
		if !hmac.Equal(want, body[40:40+authLen]) {
			return v2.note(l, errRAKP2)
		}
		return true, nil
	})
	su.resent = su.resent || n > 1
	if err != nil {
		return nil, v2.end(err)
	}

	// The keys (sections 13.31 and 13.32): SIK over both randoms, the
	// role and the user name; K1 and K2 from SIK.
	sik := hmacOf(st, key, rm[:], rc[:], []byte{role, uint8(len(name))}, name)
	k1 := hmacOf(st, sik, bytesOf(0x01, 20))
	k2 := hmacOf(st, sik, bytesOf(0x02, 20))

	// RAKP Message 3 (table 13-13): tag, status, reserved, the BMC's
	// session ID, and the authentication code over the BMC's random, the
	// console's session ID, the role and the user name.
	const rakp3Tag = 2
	r3 := []byte{rakp3Tag, 0, 0, 0}
	r3 = binary.LittleEndian.AppendUint32(r3, bmcID)
	r3 = append(r3, hmacOf(st, key, rc[:], le32(consoleID), []byte{role, uint8(len(name))}, name)...)
	rakp3 := sessionless(ptRAKP3, r3)
	su.step = "RAKP 3"
	var v4 pending
	n, err = l.roundTrip(ctx, "RAKP 3", v4.resend(rakp3), func(p []byte) (bool, error) {
		body, err := sessionlessPayload(p, ptRAKP4)
		if err != nil || len(body) < 8 || body[0] != rakp3Tag || binary.LittleEndian.Uint32(body[4:]) != consoleID {
			l.drop(fmt.Errorf("not the RAKP 4 of this setup: %v", err))
			return false, nil
		}
		if body[1] != 0 {
			return v4.note(l, &RefusedError{Step: "RAKP 3", Status: body[1], Suite: st.id})
		}
		// RAKP 4 (table 13-14): the integrity check value over the
		// console's random, the BMC's session ID and its GUID, with SIK.
		if len(body) < 8+st.icvLen {
			return v4.note(l, &ProtocolError{Step: "RAKP 3", Reason: fmt.Sprintf("RAKP 4 truncated, %d bytes", len(body))})
		}
		want := hmacOf(st, sik, rm[:], le32(bmcID), guid[:])[:st.icvLen]
		if !hmac.Equal(want, body[8:8+st.icvLen]) {
			return v4.note(l, errRAKP4)
		}
		return true, nil
	})
	su.resent = su.resent || n > 1
	s := &session{link: l, keys: keys{st: st, consoleID: consoleID, bmcID: bmcID, k1: k1, aesKey: k2[:16], random: randRead}}
	if err != nil {
		if n > 0 {
			// RAKP 3 went out: the BMC may hold the session active (its
			// RAKP 4 lost, or forged over): the caller ends it with Close
			// Session, which the BMC takes only if it has these keys.
			return s, v4.end(err)
		}
		return nil, v4.end(err)
	}

	// The session starts at the user privilege: raise it (section 22.18).
	su.step = "privilege"
	if _, err := s.command(ctx, netFnApp, cmdSetPriv, []byte{priv}); err != nil {
		var ce completionError
		if errors.As(err, &ce) && (ce == 0x80 || ce == 0x81) {
			return s, fmt.Errorf("%w: Set Session Privilege Level: %v", errPrivilege, err)
		}
		return s, err
	}
	return s, nil
}

// pending is the verdict of a RAKP step on the datagrams that claimed to
// be its answer (the setup's tag and console session ID) and did not
// verify: a bad authentication code, a refusal status, a truncated
// message. Anyone on the network can send those, so each is dropped and
// counted like an in-session forgery, and the step waits on, without
// sending its request again, to the end of its time ((Retries+1)×Timeout
// from the first send, however many such answers come) for one that
// verifies; only then is the verdict the step's error. The request is not
// sent again after such an answer: a BMC answers a wrong password again,
// and counts each against its lockout.
type pending struct{ err error }

// rank orders verdicts: a message that does not verify with the password
// or the session key (status 0: the BMC's own answer to a wrong password
// looks like that, and only a BMC that has the account answers so) says
// more than a refusal status, which anyone can send, and that more than a
// malformed message.
func rank(err error) int {
	var pe *ProtocolError
	var re *RefusedError
	switch {
	case errors.As(err, &pe):
		return 1
	case errors.As(err, &re):
		return 2
	default: // errRAKP2, errRAKP4
		return 3
	}
}

// note drops the datagram that failed with err and keeps err as the
// verdict when it ranks above the one kept (the first of a rank).
func (v *pending) note(l *link, err error) (bool, error) {
	l.drop(err)
	if v.err == nil || rank(err) > rank(v.err) {
		v.err = err
	}
	return false, nil
}

// resend is the step's next datagram: p, until an answer failed; then
// nothing (the wait goes on).
func (v *pending) resend(p []byte) func() ([]byte, error) {
	return func() ([]byte, error) {
		if v.err != nil {
			return nil, nil
		}
		return p, nil
	}
}

// end is the step's error: the verdict when the wait ran out (every try,
// or the caller's deadline) after an answer that failed.
func (v *pending) end(err error) error {
	if v.err != nil && (errors.Is(err, errNoAnswer) || errors.Is(err, context.DeadlineExceeded)) {
		return v.err
	}
	return err
}

func randRead(b []byte) error { _, err := rand.Read(b); return err }

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// Login failures of the RAKP exchange.
var (
	errRAKP2 = errors.New("the BMC's RAKP 2 does not verify with the password: a wrong password (or user name), or an answer not from the BMC")
	errRAKP4 = errors.New("the BMC's RAKP 4 does not verify with the session key: the BMC uses a BMC key (Kg), which this package does not support, or the answer is not from the BMC")
	// errPrivilege: the account may not have the privilege asked.
	errPrivilege = errors.New("the account may not have the privilege asked (Config.Privilege)")
)
