package ipmi_test

import (
	"context"
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

// Review 39 round 12 (point 2): OnChecked's check runs after Get Chassis
// Status was answered and before the power up is sent (ground truth: the
// BMC's own command log); a check that refuses sends nothing and its error
// matches power.ErrNotSent and the check's error.
func TestOnCheckedChecksAfterTheReadAndRefusalSendsNothing(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	var _ power.CheckedOner = c
	p.OutOfBandOff()

	no := errors.New("no longer wanted")
	var atCheck []string
	err := c.OnChecked(ctx, func(context.Context) error { atCheck = b.Commands(); return no })
	require.Error(t, err)
	assert.ErrorIs(t, err, no)
	assert.ErrorIs(t, err, power.ErrNotSent)
	require.NotEmpty(t, atCheck)
	assert.Equal(t, ipmitest.Status, atCheck[len(atCheck)-1], "the state read was answered before the check")
	assert.NotContains(t, b.Commands(), ipmitest.PowerUp)
	assert.False(t, p.HardwareOn())

	require.NoError(t, c.OnChecked(ctx, func(context.Context) error { atCheck = b.Commands(); return nil }))
	assert.Equal(t, append(atCheck, ipmitest.PowerUp), b.Commands(), "the power up is the only command after the check")
	assert.True(t, p.HardwareOn())
}

// Review 39 round 13 (point 1): a power up whose answer is lost is sent
// again on a new session, opened after a login the BMC may answer late:
// check runs again after that login, just before the second sending, and
// a refusal then sends nothing more; the first sending may have been
// carried out, so the error does not match power.ErrNotSent (ground
// truth: the BMC's own command log and the hardware). A man in the
// middle drops the first session's power up. Before the fix check ran
// once, before the first sending, and the second went out unchecked.
func TestOnCheckedChecksAgainOnNewSession(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 100 * time.Millisecond, Retries: 1})
	require.NoError(t, err)
	defer c.Close()
	p.OutOfBandOff()

	m.mu.Lock()
	first := m.consoleID
	index := 0
	m.toBMC = func(q []byte) bool {
		if !m.active || !sessionDatagram(q) || m.consoleID != first {
			return true
		}
		index++
		return index < 2 // the state read passes, the power up (and its retransmission) does not
	}
	m.mu.Unlock()
	no := errors.New("no longer wanted")
	calls := 0
	err = c.OnChecked(ctx, func(context.Context) error {
		calls++
		if calls > 1 {
			return no
		}
		return nil
	})
	require.Error(t, err)
	assert.Equal(t, 2, calls, "checked before the first sending and again on the new session")
	assert.ErrorIs(t, err, no)
	assert.NotErrorIs(t, err, power.ErrNotSent, "the first power up went out and may have been carried out")
	assert.NotContains(t, b.Commands(), ipmitest.PowerUp)
	assert.False(t, p.HardwareOn())
}
