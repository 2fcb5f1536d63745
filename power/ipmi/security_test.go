package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// downgrader is an in-process man in the middle between a client and a
// BMC: it rewrites the algorithms of every RMCP+ Open Session Request to
// those of cipher suite to, so the BMC's response offers suite to whatever
// the client asked, and it counts what the client sends after that
// response.
type downgrader struct {
	to   int
	ln   *net.UDPConn
	up   *net.UDPConn
	mu   sync.Mutex
	peer *net.UDPAddr
	// responded: an Open Session Response went to the client;
	// sentAfter: datagrams the client sent after it.
	responded bool
	sentAfter int
}

func newDowngrader(t *testing.T, bmcAddr string, to int) *downgrader {
	t.Helper()
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	ra, err := net.ResolveUDPAddr("udp", bmcAddr)
	require.NoError(t, err)
	up, err := net.DialUDP("udp", nil, ra)
	require.NoError(t, err)
	d := &downgrader{to: to, ln: ln, up: up}
	t.Cleanup(func() { ln.Close(); up.Close() })
	go d.fromClient()
	go d.fromBMC()
	return d
}

func (d *downgrader) addr() (string, int) {
	a := d.ln.LocalAddr().(*net.UDPAddr)
	return a.IP.String(), a.Port
}

func (d *downgrader) fromClient() {
	buf := make([]byte, 2048)
	for {
		n, peer, err := d.ln.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p := buf[:n]
		d.mu.Lock()
		d.peer = peer
		if d.responded {
			d.sentAfter++
		}
		d.mu.Unlock()
		// RMCP+ Open Session Request (payload type 10h): the algorithms
		// sit in the fifth byte of each 8-byte payload after the header.
		if n >= 16+32 && p[4] == 0x06 && p[5]&0x3f == 0x10 {
			a, i, c, ok := types.GetCipherSuiteAlgorithms(types.CipherSuiteID(d.to))
			if ok {
				p[16+12], p[16+20], p[16+28] = uint8(a), uint8(i), uint8(c)
			}
		}
		_, _ = d.up.Write(p)
	}
}

func (d *downgrader) fromBMC() {
	buf := make([]byte, 2048)
	for {
		n, err := d.up.Read(buf)
		if err != nil {
			return
		}
		d.mu.Lock()
		peer := d.peer
		if n > 5 && buf[4] == 0x06 && buf[5]&0x3f == 0x11 {
			d.responded = true
		}
		d.mu.Unlock()
		if peer != nil {
			_, _ = d.ln.WriteToUDP(buf[:n], peer)
		}
	}
}

func (d *downgrader) after() (bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.responded, d.sentAfter
}

// TestCipherSuiteDowngradeRefused: pinned to suite 3 or 17, a session
// whose Open Session Response offers suite 0, 1 or 2 (or 3 when 17 is
// pinned) is refused with a *ipmi.DowngradeError naming both suites, and
// the client sends nothing after that response: no RAKP, no command. go-ipmi
// v0.9.1 alone adopts whatever the response names (the session ran, and a
// power state was read from it).
func TestCipherSuiteDowngradeRefused(t *testing.T) {
	for _, tc := range []struct{ pinned, offered int }{
		{3, 0}, {3, 1}, {3, 2}, {17, 0}, {17, 1}, {17, 2}, {17, 3},
	} {
		t.Run(fmt.Sprintf("pinned %d offered %d", tc.pinned, tc.offered), func(t *testing.T) {
			hw := fake.NewPower(time.Now, fake.PowerConfig{})
			b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, CipherSuites: []uint8{0, 1, 2, 3, 17}})
			require.NoError(t, err)
			defer b.Close()
			mitm := newDowngrader(t, b.Addr(), tc.offered)
			host, port := mitm.addr()
			c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
				CipherSuite: tc.pinned, Timeout: 300 * time.Millisecond, Retries: 1})
			if err == nil {
				s, serr := c.State(context.Background())
				_ = c.Close()
				t.Fatalf("a session with suite %d's algorithms ran although %d was pinned (state %v, %v)", tc.offered, tc.pinned, s, serr)
			}
			var de *ipmi.DowngradeError
			require.ErrorAs(t, err, &de)
			assert.ErrorIs(t, err, ipmi.ErrDowngrade)
			assert.Equal(t, tc.pinned, de.Asked)
			assert.Equal(t, tc.offered, de.Offered)
			assert.Contains(t, err.Error(), fmt.Sprintf("cipher suite %d was pinned but the BMC offered cipher suite %d", tc.pinned, tc.offered))
			assert.Equal(t, power.ClassFailed, power.Classify(err), "not busy: retrying gets the same answer")
			assert.NotContains(t, err.Error(), pass)
			responded, sent := mitm.after()
			assert.True(t, responded)
			assert.Zero(t, sent, "datagrams sent on a downgraded session")
			assert.Empty(t, b.Commands(), "no command reached the BMC")
		})
	}
	t.Run("no downgrade passes through", func(t *testing.T) {
		hw := fake.NewPower(time.Now, fake.PowerConfig{})
		b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass})
		require.NoError(t, err)
		defer b.Close()
		mitm := newDowngrader(t, b.Addr(), 17)
		host, port := mitm.addr()
		c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
			CipherSuite: 17, Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		defer c.Close()
		s, err := c.State(context.Background())
		require.NoError(t, err)
		assert.Equal(t, power.StateOn, s)
	})
}

// TestLongUserNameIsConfigError: a user name over IPMI's 16 bytes (or a
// password over 20) is a configuration error before anything is sent, not
// a busy BMC to retry.
func TestLongUserNameIsConfigError(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{})
	for _, cfg := range []ipmi.Config{
		{Host: b.Host(), Port: b.Port(), Username: "a-seventeen-bytes", Password: pass},
		{Host: b.Host(), Port: b.Port(), Username: user, Password: "twenty-one-bytes-long"},
	} {
		_, err := ipmi.Connect(context.Background(), cfg)
		require.ErrorIs(t, err, ipmi.ErrConfig)
		assert.NotEqual(t, power.ClassBusy, power.Classify(err))
		assert.NotContains(t, err.Error(), cfg.Password)
	}
	assert.Zero(t, b.Packets(), "nothing is sent for a configuration that cannot work")
}

// TestIPv6Literal: an IPv6 literal, bracketed or not, reaches the BMC
// (go-ipmi alone formats "%s:%d" and fails with "too many colons").
func TestIPv6Literal(t *testing.T) {
	probe, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Fatalf("this machine has no IPv6 loopback: %v", err)
	}
	probe.Close()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, Addr: "[::1]:0"})
	require.NoError(t, err)
	defer b.Close()
	for _, host := range []string{"::1", "[::1]"} {
		c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: b.Port(), Username: user, Password: pass, Timeout: 300 * time.Millisecond})
		require.NoError(t, err, host)
		s, err := c.State(context.Background())
		require.NoError(t, err)
		assert.Equal(t, power.StateOn, s)
		require.NoError(t, c.Close())
	}
	assert.Equal(t, "[::1]:"+strconv.Itoa(b.Port()), b.Addr())
}

// TestDefaultPrivilegeIsOperator: an account limited to the operator
// privilege controls power with the default Config (which asked for
// administrator before, and failed); asking for administrator explicitly is
// refused as an authentication failure.
func TestDefaultPrivilegeIsOperator(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, OperatorOnly: true})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.False(t, hw.HardwareOn())
	require.NoError(t, c.Close())

	_, err = ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass,
		Privilege: "administrator", Timeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.True(t, errors.Is(err, power.ErrAuth), "%v", err)
}
