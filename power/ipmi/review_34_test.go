package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestReview34_RefusedPowerDownWithStaleOffReadIsNotSuccess: the doc says
// a read of off may be a stale echo of a host powered on a moment ago, so
// power down is sent whatever the state reads. But when that power down
// is refused (Node Busy, not applied) Off(hard) reads the state, gets the
// stale "off" and returns success: the caller is told the host is off
// while it runs (ground truth: HardwareOn). The same happens when a man
// in the middle drops the Chassis Control requests and lets the reads by.
func TestReview34_RefusedPowerDownWithStaleOffReadIsNotSuccess(t *testing.T) {
	ctx := context.Background()
	clk, b, p := staleBMC34(t, power.StateOff)
	c := connect(t, b)
	clk.Advance(10 * time.Second)
	p.OutOfBandOn()
	clk.Advance(time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s, "the emulator should echo the old state")
	require.True(t, p.HardwareOn())

	b.FailNext(ipmitest.PowerDown, 0xc0, false) // Node Busy, not applied
	err = c.Off(ctx, power.ModeHard)
	if err == nil {
		assert.False(t, p.HardwareOn(), "Off(hard) reported success from a stale read of off after the BMC refused power down: the host still runs")
	}
}

// rakpForger passes the BMC's datagrams on, but puts a forged copy of
// the BMC's RAKP message pt (13h: RAKP 2, 15h: RAKP 4) ahead of the real
// one: the tail of the message (RAKP 2's key exchange authentication
// code, RAKP 4's integrity check value) flipped, or the datagram cut.
// Someone who can only inject (a sniffer on the management network that
// cannot drop) can do this.
func rakpForger(m *mitm, pt byte, forge func(p []byte) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.toClient = func(p []byte) [][]byte {
		if payloadType(p)&0x3f == int(pt) {
			q := forge(append([]byte(nil), p...))
			return [][]byte{q, p}
		}
		return [][]byte{p}
	}
}

// TestReview34_ForgedRAKPAheadOfTheBMCIsNotAWrongPassword: a RAKP 2 whose
// HMAC does not verify, or a RAKP 4 whose integrity check value does not,
// or a truncated one, proves nothing about the password: anybody on the
// network can send it, and the BMC's authentic answer is right behind
// it. The client takes the first datagram that names its session ID as
// the verdict: Connect fails with power.ErrAuth ("wrong password"), of
// class failed, which the Pool punishes with its authentication back-off
// (30 s doubling to 30 min) and the operator reads as a bad password,
// although the password is right and the real RAKP 2/4 would verify. The
// in-session rule (an unverifiable datagram is dropped and counted) should
// apply here too: only a timeout with nothing verifying is a refusal.
func TestReview34_ForgedRAKPAheadOfTheBMCIsNotAWrongPassword(t *testing.T) {
	flipTail := func(p []byte) []byte { p[len(p)-1] ^= 0xff; return p }
	for _, tc := range []struct {
		name  string
		pt    byte
		forge func(p []byte) []byte
	}{
		{"RAKP 2 with a made-up HMAC", 0x13, flipTail},
		{"RAKP 4 with a made-up ICV", 0x15, flipTail},
		{"RAKP 2 truncated", 0x13, func(p []byte) []byte {
			// Keep tag, status, console ID; cut the randoms: the
			// payload length says what is left.
			p = p[:16+24]
			p[14], p[15] = 24, 0
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
			m := newMITM(t, b.Addr())
			rakpForger(m, tc.pt, tc.forge)
			c, err := dialVia34(m, t, pass, 300*time.Millisecond, 1)
			assert.False(t, errors.Is(err, power.ErrAuth), "an injected datagram made the right password read as refused: %v", err)
			require.NoError(t, err, "the BMC's authentic answer came right after the forgery")
			readsOn34(t, c, hw)
		})
	}
}

// TestReview34_SoftShutdownNotSentBlind: the doc gives the reason a host
// that reads off gets no soft shutdown: some BMCs press the power button
// for it, which powers on a host that is off (and main's doc.go now
// guarantees "it is sent only when a fresh read says the host is on").
// When the read fails (here Get Chassis Status answered "cannot provide
// response"; a man in the middle can get the same by dropping the
// answers to the read and letting the Chassis Control through), Off(soft)
// sends the soft shutdown anyway, to a host that is off (ground truth).
func TestReview34_SoftShutdownNotSentBlind(t *testing.T) {
	ctx := context.Background()
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	c := connect(t, b)
	require.False(t, hw.HardwareOn())
	b.FailNext(ipmitest.Status, 0xce, false)
	_ = c.Off(ctx, power.ModeSoft)
	assert.NotContains(t, b.Commands(), ipmitest.SoftOff,
		"a soft shutdown (a button press on some BMCs) went to a host that is off, on no reading at all")
}

// scriptedBMC is a hostile BMC on loopback UDP: answer returns what it
// sends back for each datagram.
func scriptedBMC(t *testing.T, answer func(p []byte) [][]byte) (string, int) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, peer, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			for _, q := range answer(append([]byte(nil), buf[:n]...)) {
				_, _ = conn.WriteToUDP(q, peer)
			}
		}
	}()
	a := conn.LocalAddr().(*net.UDPAddr)
	return a.IP.String(), a.Port
}

// v15Answer answers the IPMI v1.5 request p with completion code 0 and
// data.
func v15Answer(p []byte, data []byte) []byte {
	msg := p[14 : 14+int(p[13])]
	netFn, rq, cmd := msg[1]>>2, msg[4]>>2, msg[5]
	m := []byte{0x81, (netFn | 1) << 2, 0, 0x20, rq << 2, cmd, 0}
	m[2] = -(m[0] + m[1])
	m = append(m, data...)
	var s uint8
	for _, b := range m[3:] {
		s += b
	}
	m = append(m, -s)
	q := []byte{0x06, 0x00, 0xff, 0x07, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, uint8(len(m))}
	return append(q, m...)
}

// TestReview34_RefusalErrorIsBounded: after an Open Session refusal "no
// cipher suite match" (unauthenticated: anyone may send it), the client
// asks Get Channel Cipher Suites (unauthenticated too) up to 64 times and
// puts every suite ID of every answer in the error text, unbounded. A
// hostile BMC or an injector makes one Connect error tens of kilobytes
// long (logged, put in events and conditions), although the adapter
// bounds error texts elsewhere (maxMessage, 512).
func TestReview34_RefusalErrorIsBounded(t *testing.T) {
	records := []byte{0x01}
	for len(records) < 241 {
		records = append(records, 0xc0, 0x03)
	}
	host, port := scriptedBMC(t, func(p []byte) [][]byte {
		switch {
		case len(p) >= 20 && p[4] == 0x00 && p[19] == 0x54: // Get Channel Cipher Suites
			return [][]byte{v15Answer(p, records)}
		case len(p) >= 20 && p[4] == 0x00: // Get Channel Authentication Capabilities
			return [][]byte{v15Answer(p, []byte{0x01, 0x80, 0x04, 0x02, 0, 0, 0, 0})}
		case len(p) >= 24 && p[4] == 0x06 && p[5] == 0x10: // Open Session: no cipher suite match
			body := append([]byte{p[16], 0x11, 0, 0}, p[20:24]...)
			q := []byte{0x06, 0x00, 0xff, 0x07, 0x06, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, uint8(len(body)), 0}
			return [][]byte{append(q, body...)}
		}
		return nil
	})
	_, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond})
	require.Error(t, err)
	var re *ipmi.RefusedError
	require.ErrorAs(t, err, &re)
	assert.LessOrEqual(t, len(err.Error()), 2048, "a Connect error of %d bytes, %d suite IDs from unauthenticated answers", len(err.Error()), len(re.Offered))
}

// TestReview34_EmulatorBMCResetLeavesTheHostAlone: ipmitest's BMC maps
// go-ipmi's HAL wrongly: the App commands Cold Reset and Warm Reset (IPMI
// v2.0 sections 20.2 and 20.3: reset the BMC, not the host) power-cycle
// the host and soft-power it off (WarmReset is the HAL method go-ipmi
// calls for both App Warm Reset and Chassis Control soft shutdown). The
// package doc says a BMC reset leaves the host's power untouched; a test
// or tool that resets the emulated BMC (ipmitool mc reset) turns the host
// off. Ground truth: the fake.Power's hardware.
func TestReview34_EmulatorBMCResetLeavesTheHostAlone(t *testing.T) {
	tool, err := exec.LookPath("ipmitool")
	if err != nil {
		skipInterop(t, "ipmitool not installed (apt-get install ipmitool)")
	}
	for _, kind := range []string{"warm", "cold"} {
		t.Run(kind, func(t *testing.T) {
			b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
			out, err := exec.Command(tool, "-I", "lanplus", "-H", b.Host(), "-p", fmt.Sprint(b.Port()),
				"-U", user, "-P", pass, "-C", "3", "-L", "ADMINISTRATOR", "mc", "reset", kind).CombinedOutput()
			t.Logf("ipmitool mc reset %s: %s (%v)", kind, strings.TrimSpace(string(out)), err)
			time.Sleep(100 * time.Millisecond)
			assert.True(t, hw.HardwareOn(), "a BMC %s reset powered the host off", kind)
			assert.Empty(t, hw.Transitions(), "a BMC %s reset changed the host's power", kind)
		})
	}
}

// TestReview34_DroppedPowerDownWithStaleOffReadIsNotSuccess: the network
// variant of TestReview34_RefusedPowerDownWithStaleOffReadIsNotSuccess,
// with an honest BMC that reads the power-good line late. A man in the
// middle without the keys drops the console's Chassis Control requests
// (by position: the first request of the old session, the second of the
// next one, after Set Session Privilege) and lets everything else by.
// Off(hard) times out twice, then reads the state on a third session,
// gets the BMC's authentic but stale "off", and reports success: the
// caller is told the host is off while it runs.
func TestReview34_DroppedPowerDownWithStaleOffReadIsNotSuccess(t *testing.T) {
	ctx := context.Background()
	clk, b, p := staleBMC34(t, power.StateOff)
	c, m := connectVia34(t, b, 100*time.Millisecond, 1)
	clk.Advance(10 * time.Second)
	p.OutOfBandOn()
	clk.Advance(time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s, "the emulator should echo the old state")

	dropBySession34(m, func(session, index int) bool {
		switch session {
		case 0: // the session of the Off: its power down
			return false
		case 1: // the session opened again: Set Session Privilege passes, power down does not
			return index < 2
		}
		return true
	})
	err = c.Off(ctx, power.ModeHard)
	assert.NotContains(t, b.Commands(), ipmitest.PowerDown, "the man in the middle let a power down by")
	if err == nil {
		assert.False(t, p.HardwareOn(), "Off(hard) reported success though no power down reached the BMC: the host still runs")
	}
}
