package ipmi_test

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// mitm is an in-process man in the middle between one console and a BMC
// on loopback UDP. It knows neither the password nor the session keys: it
// sees the datagrams, and the hooks decide what passes and what it sends
// in their stead.
type mitm struct {
	ln, up *net.UDPConn
	wg     sync.WaitGroup
	mu     sync.Mutex
	peer   *net.UDPAddr
	// consoleID is the console's session ID (from its last Open Session
	// Request); active: a RAKP 4 went to the console since.
	consoleID uint32
	active    bool
	// toBMC sees each datagram of the console (under mu) and says
	// whether it goes on; toClient sees each of the BMC's and returns
	// what the console gets in its stead (under mu).
	toBMC    func(p []byte) bool
	toClient func(p []byte) [][]byte
	// openAnswered: an answer to Open Session went to the console;
	// sentAfter counts the console's datagrams after it.
	openAnswered bool
	sentAfter    int
}

func newMITM(t *testing.T, bmcAddr string) *mitm {
	t.Helper()
	m, err := startMITM(bmcAddr)
	require.NoError(t, err)
	t.Cleanup(m.close)
	return m
}

// startMITM starts a man in the middle before the BMC at bmcAddr; close
// stops it.
func startMITM(bmcAddr string) (*mitm, error) {
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	ra, err := net.ResolveUDPAddr("udp", bmcAddr)
	if err != nil {
		ln.Close()
		return nil, err
	}
	up, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		ln.Close()
		return nil, err
	}
	m := &mitm{ln: ln, up: up}
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.fromClient() }()
	go func() { defer m.wg.Done(); m.fromBMC() }()
	return m, nil
}

func (m *mitm) close() {
	m.ln.Close()
	m.up.Close()
	m.wg.Wait()
}

func (m *mitm) addr() (string, int) {
	a := m.ln.LocalAddr().(*net.UDPAddr)
	return a.IP.String(), a.Port
}

// payloadType returns the RMCP+ payload type byte of p, or -1.
func payloadType(p []byte) int {
	if len(p) < 16 || p[4] != 0x06 {
		return -1
	}
	return int(p[5])
}

func (m *mitm) fromClient() {
	buf := make([]byte, 2048)
	for {
		n, peer, err := m.ln.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p := append([]byte(nil), buf[:n]...)
		m.mu.Lock()
		m.peer = peer
		if m.openAnswered {
			m.sentAfter++
		}
		if payloadType(p) == 0x10 && n >= 24 {
			m.consoleID = binary.LittleEndian.Uint32(p[20:24])
			m.active, m.openAnswered, m.sentAfter = false, false, 0
		}
		pass := m.toBMC == nil || m.toBMC(p)
		m.mu.Unlock()
		if pass {
			_, _ = m.up.Write(p)
		}
	}
}

func (m *mitm) fromBMC() {
	buf := make([]byte, 2048)
	for {
		n, err := m.up.Read(buf)
		if err != nil {
			return
		}
		p := append([]byte(nil), buf[:n]...)
		m.mu.Lock()
		wasOpen := payloadType(p) == 0x11
		out := [][]byte{p}
		if m.toClient != nil {
			out = m.toClient(p)
		}
		for _, q := range out {
			switch {
			case len(q) > 5 && q[4] == 0x06 && q[5]&0x3f == 0x15:
				m.active = true
			case wasOpen:
				m.openAnswered = true
			}
		}
		peer, console := m.peer, m.consoleID
		m.mu.Unlock()
		for _, q := range out {
			// The BMC's late answer in an earlier session goes to that
			// session's console, whose socket is closed: not to the
			// latest peer (each session dials its own socket).
			if sessionDatagram(q) && binary.LittleEndian.Uint32(q[6:10]) != console {
				continue
			}
			if peer != nil {
				_, _ = m.ln.WriteToUDP(q, peer)
			}
		}
	}
}

// inject sends p to the console (m.mu held or not).
func (m *mitm) inject(peer *net.UDPAddr, p []byte) {
	if peer != nil {
		_, _ = m.ln.WriteToUDP(p, peer)
	}
}

// sessionDatagram reports whether p is an IPMI payload of a session (the
// console's requests and the BMC's answers once the session is up).
func sessionDatagram(p []byte) bool {
	return payloadType(p) >= 0 && p[5]&0x3f == 0 && binary.LittleEndian.Uint32(p[6:10]) != 0
}

// forgedAnswer builds what someone without the keys can send: an RMCP+
// IPMI answer in clear text (flags as given, no valid AuthCode) to request
// (netFn, cmd, rqSeq) for session sid, with completion code 0 and data.
func forgedAnswer(sid uint32, flags uint8, seq uint32, netFn, cmd, rqSeq uint8, data []byte) []byte {
	msg := []byte{0x81, (netFn | 1) << 2, 0, 0x20, rqSeq << 2, cmd, 0}
	msg[2] = -(msg[0] + msg[1])
	msg = append(msg, data...)
	var sum uint8
	for _, b := range msg[3:] {
		sum += b
	}
	msg = append(msg, -sum)
	p := []byte{0x06, 0x00, 0xff, 0x07, 0x06, flags}
	p = binary.LittleEndian.AppendUint32(p, sid)
	p = binary.LittleEndian.AppendUint32(p, seq)
	p = binary.LittleEndian.AppendUint16(p, uint16(len(msg)))
	p = append(p, msg...)
	if flags&0x40 != 0 {
		// A trailer with an AuthCode of zeros.
		pad := (4 - (len(p)-4+2)%4) % 4
		for range pad {
			p = append(p, 0xff)
		}
		p = append(p, uint8(pad), 0x07)
		p = append(p, make([]byte, 16)...)
	}
	return p
}

// chassisOffAnswers are forged answers "the chassis is off" (Get Chassis
// Status, power bit clear) and "done" (Chassis Control) for every IPMI
// sequence number, in clear text, for session sid.
func chassisOffAnswers(sid uint32, flags uint8, seq uint32) [][]byte {
	var out [][]byte
	for rq := uint8(0); rq < 64; rq++ {
		out = append(out,
			forgedAnswer(sid, flags, seq+uint32(rq), 0x00, 0x01, rq, []byte{0x00, 0x00, 0x00}),
			forgedAnswer(sid, flags, seq+uint32(rq), 0x00, 0x02, rq, nil))
	}
	return out
}
