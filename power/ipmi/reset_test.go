package ipmi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestResetRestartsWithoutPowerOff (issue 39, point 3): Reset is one
// Chassis Control hard reset to a host that reads on; the hardware never
// goes off (ground truth) and records one reset. A host that reads off
// gets nothing; a refused reset (an authenticated completion code) is an
// error of its class, with no reset; a reset whose answer is lost is busy
// and is never sent a second time.
func TestResetRestartsWithoutPowerOff(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	start := time.Now()
	require.NoError(t, c.Reset(ctx))
	assert.Equal(t, []string{ipmitest.Status, ipmitest.HardReset}, b.Commands())
	assert.Len(t, p.Resets(), 1, "ground truth: one reset")
	assert.False(t, p.WasOffDuring(start, time.Now()), "ground truth: never off")

	p.OutOfBandOff()
	require.ErrorIs(t, c.Reset(ctx), power.ErrBusy)
	assert.NotContains(t, b.Commands()[2:], ipmitest.HardReset, "nothing sent to a host that reads off")
	assert.False(t, p.HardwareOn())

	p.OutOfBandOn()
	b.FailNext(ipmitest.HardReset, 0xc0, false) // node busy
	require.ErrorIs(t, c.Reset(ctx), power.ErrBusy)
	assert.Len(t, p.Resets(), 1, "a refused reset resets nothing")
}

// TestResetLostAnswerNotRepeated: a hard reset whose answer never comes
// may have been carried out: it is busy, and exactly one hard reset went
// out (a retransmit or a repeat on a new session would reset the host
// again).
func TestResetLostAnswerNotRepeated(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 250 * time.Millisecond, Retries: 2})
	require.NoError(t, err)
	defer c.Close()

	m.mu.Lock()
	first, answers := m.consoleID, 0
	m.toClient = func(q []byte) [][]byte {
		if m.consoleID == first && sessionDatagram(q) {
			// The answer to Get Chassis Status passes (on); the answer
			// to the hard reset (carried out by the BMC) is lost.
			answers++
			if answers > 1 {
				return nil
			}
		}
		return [][]byte{q}
	}
	m.mu.Unlock()

	err = c.Reset(ctx)
	require.ErrorIs(t, err, power.ErrBusy)
	n := 0
	for _, cmd := range b.Commands() {
		if cmd == ipmitest.HardReset {
			n++
		}
	}
	assert.Equal(t, 1, n, "one hard reset sent: %v", b.Commands())
	assert.Len(t, p.Resets(), 1, "the reset was carried out, its answer lost")
}
