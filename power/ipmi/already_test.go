package ipmi_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestPowerDownRefusedAsAlreadyOff: a BMC that refuses power down of a
// chassis that is off with D5h ("not supported in present state", an
// authenticated answer) gives success when a fresh read says off; the
// same refusal of a host that runs stays an error (ground truth).
func TestPowerDownRefusedAsAlreadyOff(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	c := connect(t, b)
	b.FailNext(ipmitest.PowerDown, 0xd5, false)
	require.NoError(t, c.Off(ctx, power.ModeHard), "refused as already off, and it reads off")
	assert.False(t, p.HardwareOn())

	b2, p2 := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	c2 := connect(t, b2)
	b2.FailNext(ipmitest.PowerDown, 0xd5, false)
	assert.ErrorIs(t, c2.Off(ctx, power.ModeHard), power.ErrUnsupported)
	assert.True(t, p2.HardwareOn())
}

// TestSoftShutdownUnreadIsTheReadError: when the state read before a soft
// shutdown fails, Off(soft) returns that read's class and status, and the
// host (off, ground truth) gets nothing.
func TestSoftShutdownUnreadIsTheReadError(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	c := connect(t, b)
	b.FailNext(ipmitest.Status, 0xce, false)
	err := c.Off(ctx, power.ModeSoft)
	require.ErrorIs(t, err, power.ErrBusy)
	var pe *power.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 0xce, pe.Status)
	assert.Equal(t, power.OpName(power.ModeSoft), pe.Op)
	assert.NotContains(t, b.Commands(), ipmitest.SoftOff)
	assert.False(t, p.HardwareOn())
}

// TestForgedRAKP4InsteadOfTheBMCsClosesTheSession: a man in the middle
// replaces the BMC's RAKP 4 with one whose integrity check value does not
// verify. Nothing verifies to the end of the wait: class failed, but not
// ErrAuth, since the BMC's RAKP 2 proved the password (review 34, round
// 4: TestReview34_ForgedRAKP4AfterAVerifiedRAKP2IsNotAWrongPassword). The BMC took
// RAKP 3 and holds the session active; the console ends it with Close
// Session (ground truth: the BMC's session table), rather than leave one
// of its few slots taken until the session timeout.
func TestForgedRAKP4InsteadOfTheBMCsClosesTheSession(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	m := newMITM(t, b.Addr())
	m.mu.Lock()
	m.toClient = func(p []byte) [][]byte {
		if payloadType(p)&0x3f == 0x15 {
			p[len(p)-1] ^= 0xff
		}
		return [][]byte{p}
	}
	m.mu.Unlock()
	host, port := m.addr()
	_, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond, Retries: 1})
	require.Error(t, err)
	assert.Equal(t, power.ClassFailed, power.Classify(err), "%v", err)
	assert.NotErrorIs(t, err, power.ErrAuth)
	assert.Eventually(t, func() bool { return b.Sessions() == 0 }, 2*time.Second, 10*time.Millisecond,
		"the session the BMC activated at RAKP 3 was left open (%d sessions)", b.Sessions())
}

// TestSuiteListRequestsBounded: after a "no cipher suite match" refusal,
// the console asks Get Channel Cipher Suites (unauthenticated) a few times
// at most, however long the BMC's list says it goes on (ground truth: the
// requests the scripted BMC received).
func TestSuiteListRequestsBounded(t *testing.T) {
	records := []byte{0x01}
	for len(records) < 17 {
		records = append(records, 0xc0, 0x03)
	}
	var mu sync.Mutex
	asked := 0
	host, port := scriptedBMC(t, func(p []byte) [][]byte {
		switch {
		case len(p) >= 20 && p[4] == 0x00 && p[19] == 0x54:
			mu.Lock()
			asked++
			mu.Unlock()
			return [][]byte{v15Answer(p, records)}
		case len(p) >= 20 && p[4] == 0x00:
			return [][]byte{v15Answer(p, []byte{0x01, 0x80, 0x04, 0x02, 0, 0, 0, 0})}
		case len(p) >= 24 && p[4] == 0x06 && p[5] == 0x10:
			body := append([]byte{p[16], 0x11, 0, 0}, p[20:24]...)
			q := []byte{0x06, 0x00, 0xff, 0x07, 0x06, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, uint8(len(body)), 0}
			return [][]byte{append(q, body...)}
		}
		return nil
	})
	_, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond})
	var re *ipmi.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []int{3}, re.Offered, "each suite once")
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, asked, 8, "Get Channel Cipher Suites requests")
}
