package ipmi_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// viaMITM starts a BMC whose host is on, a man in the middle before it,
// and a Controller connected through it (honestly: the hooks are set
// after).
func viaMITM(t *testing.T) (*ipmi.Controller, *mitm, *fake.Power, *ipmitest.BMC) {
	t.Helper()
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 100 * time.Millisecond, Retries: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.State(context.Background())
	require.NoError(t, err)
	require.Equal(t, power.StateOn, s)
	return c, m, hw, b
}

// noForgedState checks, against the hardware, that neither a read nor a
// power-off of a host that is on was answered from a forged datagram: the
// read is on or unknown with an error, and a power-off that succeeded
// powered the host off.
func noForgedState(t *testing.T, c *ipmi.Controller, hw *fake.Power) {
	t.Helper()
	ctx := context.Background()
	require.True(t, hw.HardwareOn())
	s, err := c.State(ctx)
	if err != nil {
		assert.Equal(t, power.StateUnknown, s)
		assert.NotEqual(t, power.ClassNone, power.Classify(err))
	} else {
		assert.Equal(t, power.StateOn, s, "a state read from a forged answer")
	}
	err = c.Off(ctx, power.ModeHard)
	if err == nil {
		assert.False(t, hw.HardwareOn(), "a power-off reported done while the host runs: a forged answer was taken")
	}
}

// TestForgedAnswersInSessionAreDropped (issue 34, point 1): a man in the
// middle who drops the console's requests of an established session and
// answers them himself, without the session keys, must not be believed:
// not in clear text, not for another session ID, not with a made-up
// AuthCode, not by replaying or relabelling an answer of the BMC. go-ipmi
// v0.9.1 took the clear-text answers ("off", "done") as the BMC's.
func TestForgedAnswersInSessionAreDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forged func(m *mitm) [][]byte
	}{
		{"clear text", func(m *mitm) [][]byte { return chassisOffAnswers(m.consoleID, 0x00, 1) }},
		{"clear text for another session ID", func(m *mitm) [][]byte { return chassisOffAnswers(m.consoleID+1, 0x00, 1) }},
		{"clear text for session 0", func(m *mitm) [][]byte { return chassisOffAnswers(0, 0x00, 1) }},
		{"authenticated flag, made-up AuthCode", func(m *mitm) [][]byte { return chassisOffAnswers(m.consoleID, 0x40, 1000) }},
		{"encrypted and authenticated flags, made-up AuthCode", func(m *mitm) [][]byte { return chassisOffAnswers(m.consoleID, 0xc0, 1000) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, hw, b := viaMITM(t)
			m.mu.Lock()
			m.toBMC = func(p []byte) bool {
				if !m.active || !sessionDatagram(p) {
					return true
				}
				for _, q := range tc.forged(m) {
					m.inject(m.peer, q)
				}
				return false
			}
			m.mu.Unlock()
			before := len(b.Commands())
			noForgedState(t, c, hw)
			assert.Len(t, b.Commands(), before, "no request reached the BMC")
		})
	}
}

// TestReplayedAnswerIsDropped (issue 34, point 1): an answer the BMC
// really sent ("off", while the host was off) is replayed, once the host
// is on again, to a later request with the same IPMI sequence number (64
// requests on): authentic, but an old session sequence number.
func TestReplayedAnswerIsDropped(t *testing.T) {
	ctx := context.Background()
	c, m, hw, _ := viaMITM(t)
	var last []byte
	m.mu.Lock()
	m.toClient = func(p []byte) [][]byte {
		if sessionDatagram(p) {
			last = p
		}
		return [][]byte{p}
	}
	m.mu.Unlock()
	hw.OutOfBandOff()
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s)
	m.mu.Lock()
	off := last
	m.mu.Unlock()
	hw.OutOfBandOn()
	for range 63 {
		s, err := c.State(ctx)
		require.NoError(t, err)
		require.Equal(t, power.StateOn, s)
	}
	m.mu.Lock()
	m.toBMC = func(p []byte) bool {
		if !m.active || !sessionDatagram(p) {
			return true
		}
		m.inject(m.peer, off)
		relabelled := append([]byte(nil), off...)
		binary.LittleEndian.PutUint32(relabelled[6:10], m.consoleID) // another session's answer
		m.inject(m.peer, relabelled)
		return false
	}
	m.mu.Unlock()
	noForgedState(t, c, hw)
}

// TestReorderedAnswersKeepTheTruth: the BMC's answers arrive out of order
// (the first held back until the answer to the console's retransmit has
// gone by). The state read is the hardware's.
func TestReorderedAnswersKeepTheTruth(t *testing.T) {
	ctx := context.Background()
	c, m, hw, _ := viaMITM(t)
	var held []byte
	m.mu.Lock()
	m.toClient = func(p []byte) [][]byte {
		if !sessionDatagram(p) {
			return [][]byte{p}
		}
		if held == nil {
			held = p
			return nil
		}
		out := [][]byte{p, held}
		held = nil
		return out
	}
	m.mu.Unlock()
	hw.OutOfBandOff()
	s, err := c.State(ctx)
	if err == nil {
		assert.Equal(t, power.StateOff, s)
	}
	hw.OutOfBandOn()
	s, err = c.State(ctx)
	if err == nil {
		assert.Equal(t, power.StateOn, s)
	}
	// The answer held back came after a newer one: refused (its session
	// sequence number is behind), not read.
	assert.GreaterOrEqual(t, c.Dropped(), 1)
}

// downgradeTo rewrites the console's Open Session Request to ask for
// cipher suite 1 (RAKP-HMAC-SHA1, no integrity, no confidentiality), so
// that the BMC's answer names suite 1; reframe then turns that answer into
// what the console gets.
func downgradeTo1(m *mitm, reframe func(p []byte) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.toBMC = func(p []byte) bool {
		if payloadType(p) == 0x10 && len(p) >= 48 {
			p[16+12], p[16+20], p[16+28] = 1, 0, 0
		}
		return true
	}
	m.toClient = func(p []byte) [][]byte {
		if payloadType(p) == 0x11 {
			return [][]byte{reframe(p)}
		}
		return [][]byte{p}
	}
}

// TestOpenSessionAnswerMustBeExact (issue 34, point 2): after the Open
// Session Request the only acceptable datagram is an RMCP+ Open Session
// Response for it with the pinned algorithms. A suite-1 answer relabelled
// as payload type 13h or framed as IPMI v1.5 is a downgrade; a truncated
// answer, or one for another request, breaks the protocol; in every case
// the console sends nothing more and no command reaches the BMC. With
// go-ipmi v0.9.1 and the guard of issue 23, the relabelled and reframed
// answers went through: RAKP 1, RAKP 3 and a command were sent on the
// weakened session, and the error said busy.
func TestOpenSessionAnswerMustBeExact(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reframe   func(p []byte) []byte
		downgrade bool
	}{
		{"payload type 13h", func(p []byte) []byte { p[5] = 0x13; return p }, true},
		{"IPMI v1.5 framing", func(p []byte) []byte {
			body := p[16:]
			q := []byte{0x06, 0x00, 0xff, 0x07, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, uint8(len(body))}
			return append(q, body...)
		}, true},
		{"authenticated flag", func(p []byte) []byte { p[5] |= 0x40; return p }, true},
		{"truncated", func(p []byte) []byte { return p[:16+20] }, false},
		{"payload length past the datagram", func(p []byte) []byte { return p[:len(p)-1] }, false},
		{"another request's tag", func(p []byte) []byte { p[16]++; return p }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hw := fake.NewPower(time.Now, fake.PowerConfig{})
			b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, CipherSuites: []uint8{1, 3, 17}})
			require.NoError(t, err)
			defer b.Close()
			m := newMITM(t, b.Addr())
			downgradeTo1(m, tc.reframe)
			host, port := m.addr()
			c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
				Timeout: 200 * time.Millisecond, Retries: 1})
			if err == nil {
				s, serr := c.State(context.Background())
				_ = c.Close()
				t.Fatalf("a session ran on a reframed suite-1 answer (state %v, %v)", s, serr)
			}
			if tc.downgrade {
				assert.ErrorIs(t, err, ipmi.ErrDowngrade)
			}
			assert.Equal(t, power.ClassFailed, power.Classify(err), "not busy: retrying meets the same answer: %v", err)
			m.mu.Lock()
			answered, sent := m.openAnswered, m.sentAfter
			m.mu.Unlock()
			assert.True(t, answered)
			assert.Zero(t, sent, "datagrams sent after the bad answer to Open Session")
			assert.Empty(t, b.Commands(), "no command reached the BMC")
		})
	}
}

// TestForgeriesAreCounted: the datagrams refused are counted (Dropped),
// and a session that only ever gets forgeries ends busy, never a state.
func TestForgeriesAreCounted(t *testing.T) {
	c, m, _, _ := viaMITM(t)
	require.Zero(t, c.Dropped())
	m.mu.Lock()
	m.toBMC = func(p []byte) bool {
		if !m.active || !sessionDatagram(p) {
			return true
		}
		for _, q := range chassisOffAnswers(m.consoleID, 0x00, 1)[:8] {
			m.inject(m.peer, q)
		}
		return false
	}
	m.mu.Unlock()
	s, err := c.State(context.Background())
	assert.Equal(t, power.StateUnknown, s)
	assert.ErrorIs(t, err, power.ErrBusy)
	var pe *power.Error
	assert.True(t, errors.As(err, &pe))
	assert.Greater(t, c.Dropped(), 0)
}
