package ipmi_test

// Review 34, second round: what is still wrong after the fixes of the
// first round (review_34_test.go).

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestReview34_DroppedSoftShutdownWithStaleOffReadIsNotSuccess: the soft
// twin of TestReview34_DroppedPowerDownWithStaleOffReadIsNotSuccess, which
// the first round's fix left out. doc.go: "A power-off that the BMC does
// not carry out (busy, no answer, a timeout) is an error even when the
// state then reads off, since that read may be a stale echo". Off(soft)
// reads on (fresh), sends the soft shutdown; a man in the middle (or plain
// loss) drops it and its retransmit; the adapter opens a new session, reads
// the state before sending again, gets the BMC's authentic but stale
// "off" (the host was off for a second, five seconds ago, and runs again),
// and returns nil from the retry closure: Off(soft) succeeds although no
// soft shutdown ever reached the BMC (its own command log) and the host
// runs (ground truth). Root cause: ipmi.go change(), `if !on { return nil
// }` in the resend path of a soft shutdown.
func TestReview34_DroppedSoftShutdownWithStaleOffReadIsNotSuccess(t *testing.T) {
	ctx := context.Background()
	clk, b, p := staleBMC34(t, power.StateOn)
	c, m := connectVia34(t, b, 150*time.Millisecond, 1)
	// The host was off from 10 s to 11 s (a power cycle by someone else);
	// at 11 s the BMC still echoes the state of 6 s: on.
	clk.Advance(10 * time.Second)
	p.OutOfBandOff()
	clk.Advance(time.Second)
	p.OutOfBandOn()
	require.True(t, p.HardwareOn())

	dropBySession34(m, func(session, index int) bool {
		if session == 0 {
			// 1: Get Chassis Status (passes, reads on); 2: the soft
			// shutdown (dropped; meanwhile 4.5 s pass and the BMC's
			// echo reaches the second the host was off); then its
			// retransmit and Close Session (dropped).
			if index == 2 {
				clk.Advance(4500 * time.Millisecond)
			}
			return index < 2
		}
		return true
	})

	err := c.Off(ctx, power.ModeSoft)
	assert.NotContains(t, b.Commands(), ipmitest.SoftOff, "the man in the middle let a soft shutdown by")
	if err == nil {
		assert.False(t, p.HardwareOn(), "Off(soft) reported success though no soft shutdown reached the BMC and the only evidence of off is a stale read: the host still runs")
	}
}

// forgedRAKP2 is a RAKP 2 anybody who saw the console's Open Session
// Request can send: the console's tag and session ID, status 0, made-up
// randoms, GUID and key exchange authentication code.
func forgedRAKP2(consoleID uint32, status uint8) []byte {
	body := []byte{1, status, 0, 0}
	body = binary.LittleEndian.AppendUint32(body, consoleID)
	junk := make([]byte, 16+16+20)
	_, _ = rand.Read(junk)
	if status != 0 {
		junk = nil
	}
	body = append(body, junk...)
	p := []byte{0x06, 0x00, 0xff, 0x07, 0x06, 0x13, 0, 0, 0, 0, 0, 0, 0, 0}
	p = binary.LittleEndian.AppendUint16(p, uint16(len(body)))
	return append(p, body...)
}

// TestReview34_ForgedRAKP2BeforeALateBMCIsNotAWrongPassword: the first
// round's fix waits past a RAKP 2 that does not verify only to the end of
// the try under way, and then, without sending RAKP 1 again, makes the
// forgery the verdict. doc.go promises more: "only when its wait ends (one
// Timeout after such an answer ...) with nothing verifying is it the
// step's error". An injector (no dropping) sends a made-up RAKP 2 200 ms
// into a 300 ms try; the BMC's authentic RAKP 2 comes at 400 ms (a slow
// BMC: without the forgery the console sends RAKP 1 again and takes it,
// see TestConnectSurvivesALateRAKP2). The right password is reported as
// power.ErrAuth, class failed, which the Pool punishes with its
// authentication back-off (30 s doubling to 30 min) and the operator reads
// as a wrong password. Root cause: session.go roundTrip's read deadline is
// the send's (time.Now().Add(l.timeout) at the write), not a Timeout after
// the dropped answer, and pending.resend ends the step at the next try.
func TestReview34_ForgedRAKP2BeforeALateBMCIsNotAWrongPassword(t *testing.T) {
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	m := newMITM(t, b.Addr())
	rakp1s := 0
	m.mu.Lock()
	m.toBMC = func(q []byte) bool {
		if payloadType(q)&0x3f == 0x12 {
			rakp1s++
			if rakp1s == 1 {
				id, peer := m.consoleID, m.peer
				time.AfterFunc(200*time.Millisecond, func() { m.inject(peer, forgedRAKP2(id, 0)) })
			}
		}
		return true
	}
	late := true
	m.toClient = func(q []byte) [][]byte {
		if payloadType(q)&0x3f == 0x13 && late {
			// The BMC's first RAKP 2 comes 400 ms after RAKP 1 (the
			// BMC is slow, or the network is).
			late = false
			peer := m.peer
			time.AfterFunc(400*time.Millisecond, func() { m.inject(peer, q) })
			return nil
		}
		return [][]byte{q}
	}
	m.mu.Unlock()
	c, err := dialVia34(m, t, pass, 300*time.Millisecond, 2)
	require.False(t, errors.Is(err, power.ErrAuth), "a made-up RAKP 2 made the right password read as refused: %v", err)
	require.NoError(t, err, "the BMC's authentic RAKP 2 came 200 ms after the forgery, within a Timeout of it and within the step's tries")
	readsOn34(t, c, hw)
}

// TestReview34_InjectedRefusalDoesNotHideAWrongPassword: with a wrong
// password the BMC's RAKP 2 does not verify (ErrAuth, which the Pool backs
// off for 30 s to 30 min so the BMC does not lock the account). An
// injector who only sends, ahead of the BMC, a RAKP 2 with status 01h
// ("insufficient resources") makes that refusal the verdict: pending.note
// keeps the first verdict and lets a later errRAKP2 not replace it. The
// wrong password is reported busy, on every Connect, so callers retry at
// the busy rate and the BMC counts each login against its lockout. Root
// cause: session.go pending.note keeps the first verdict unless it is a
// ProtocolError; an unauthenticated status outranks the BMC's answer.
func TestReview34_InjectedRefusalDoesNotHideAWrongPassword(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	m := newMITM(t, b.Addr())
	m.mu.Lock()
	m.toBMC = func(q []byte) bool {
		if payloadType(q)&0x3f == 0x12 {
			m.inject(m.peer, forgedRAKP2(m.consoleID, 0x01))
		}
		return true
	}
	m.mu.Unlock()
	_, err := dialVia34(m, t, "wrong-"+pass, 300*time.Millisecond, 1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, power.ErrAuth), "the BMC's RAKP 2 did not verify with the password, yet an injected status makes it %v", err)
	assert.False(t, errors.Is(err, power.ErrBusy), "a wrong password reads busy: %v", err)
}

// TestReview34_SoftShutdownNotRetransmittedBlind: change() takes care
// never to send a soft shutdown again on a new session without a fresh
// read of on ("The first soft shutdown may have been applied although its
// answer was lost, and the host may be off now ... some BMCs press the
// power button for it"), and doc.go guarantees a soft shutdown "is sent
// only when a fresh read says the host is on". But inside one session,
// link.roundTrip sends the same Chassis Control soft shutdown again after
// every Timeout without an answer (Retries times), with no read between.
// On a BMC that presses the power button for it (fake.ButtonSoft) whose
// host goes off quickly (at the firmware or boot loader, where a press is
// an immediate power-off; here 50 ms), a lost answer (loss, or a man in
// the middle that drops the BMC's answers) makes the retransmit a press
// on a host that is off: it powers the host on. Ground truth: the
// fake.Power's transitions show an Off -> On that nobody asked for, and
// the BMC's command log shows the soft shutdowns. Root cause:
// session.go roundTrip resends every request, ipmi.go change() sends the
// soft shutdown through s.command with the session's Retries.
func TestReview34_SoftShutdownNotRetransmittedBlind(t *testing.T) {
	ctx := context.Background()
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn, Button: fake.ButtonSoft, SoftDelay: 50 * time.Millisecond})
	c, m := connectVia34(t, b, 250*time.Millisecond, 2)

	m.mu.Lock()
	first, answers := m.consoleID, 0
	m.toClient = func(q []byte) [][]byte {
		if m.consoleID == first && sessionDatagram(q) {
			// The answer to Get Chassis Status passes (on); every
			// later answer of this session is lost.
			answers++
			if answers > 1 {
				return nil
			}
		}
		return [][]byte{q}
	}
	m.mu.Unlock()

	_ = c.Off(ctx, power.ModeSoft)
	soft := 0
	for _, cmd := range b.Commands() {
		if cmd == ipmitest.SoftOff {
			soft++
		}
	}
	t.Logf("soft shutdowns at the BMC: %d; transitions: %v", soft, hw.Transitions())
	for _, tr := range hw.Transitions() {
		assert.False(t, tr.From == power.StateOff && tr.To == power.StateOn,
			"a soft shutdown resent without a read pressed the power button of a host that was off: it powered on at %v", tr.At)
	}
}
