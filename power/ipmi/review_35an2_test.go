package ipmi_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestReview35an2_IPMIRetriedPowerUpEndedUnsentIsErrNotSent (review 35an2,
// power.ErrNotSent: "a command whose error matches ErrNotSent certainly
// changed nothing"; round 39's do(): "a call whose context ended before
// it sent a datagram returns ErrNotSent"). The check compares the
// datagrams of the session of the attempt under way only: a power-up
// whose answer was lost on the first session (it reached the BMC, which
// applied it) is repeated on a new session (do's one retry); when the
// call's context ends before that second sending (a check that took the
// rest of the deadline, a pause), do reports the whole power-on as
// certainly not sent (ErrNotSent), and the reboot tracker undoes it as
// never sent. Ground truth: the emulator's chassis commands and its
// hardware, which is on.
func TestReview35an2_IPMIRetriedPowerUpEndedUnsentIsErrNotSent(t *testing.T) {
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond, Retries: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checks := 0
	err = c.OnChecked(ctx, func(context.Context) error {
		checks++
		m.mu.Lock()
		defer m.mu.Unlock()
		if checks == 1 {
			// The answers of this session are lost from now on: the
			// power-up reaches the BMC, its answer does not come back.
			id := m.consoleID
			m.toClient = func(p []byte) [][]byte {
				if sessionDatagram(p) && binary.LittleEndian.Uint32(p[6:10]) == id {
					return nil
				}
				return [][]byte{p}
			}
			return nil
		}
		cancel() // the deadline ends before the second sending
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 2, checks, "the power-up was tried on a second session")
	require.Contains(t, b.Commands(), ipmitest.PowerUp, "the first power-up reached the BMC")
	require.Eventually(t, hw.HardwareOn, 5*time.Second, 10*time.Millisecond, "the BMC applied it")
	assert.NotErrorIs(t, err, power.ErrNotSent,
		"a power-on the BMC received and applied is reported as certainly not sent: %v", err)
}

// TestReview35an2_IPMIRetriedPowerUpGateBackoffSaysNotCarriedOut
// (review 35an2; round 39 routes an in-call re-login through
// ConnectInfo.Gate; power.ErrBackoff: "a login the Pool did not try";
// reboot.Tracker.Sent: a power call whose error matches ErrAuth,
// ErrBackoff or ErrNotSent "is undone as if never sent"). A power-up
// whose answer was lost on the first session (it reached the BMC and
// was applied) is repeated on a new session: the re-login now asks the
// Pool's gate, which refuses while the credentials back off (another
// host of the BMC failed its login meanwhile), and do returns the
// gate's error as it is: the power-on that went out reads as a login
// not tried, matching ErrBackoff (the reboot tracker forgets it). Ground
// truth: the emulator's chassis commands and its hardware, which is on.
// The gate here is a stand-in for the Pool's, refusing as it does.
func TestReview35an2_IPMIRetriedPowerUpGateBackoffSaysNotCarriedOut(t *testing.T) {
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOff})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	gated := 0
	gate := func(context.Context) (func(error), error) {
		gated++
		return nil, &power.Error{Op: "login", Class: power.ClassBusy,
			Message: "login not tried: logins to the BMC with these credentials failed 1 time(s) in a row", Err: power.ErrBackoff}
	}
	cctx := power.WithConnectInfo(context.Background(), power.ConnectInfo{Gate: gate})
	c, err := ipmi.Connect(cctx, ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond, Retries: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	err = c.OnChecked(context.Background(), func(context.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		id := m.consoleID
		m.toClient = func(p []byte) [][]byte {
			if sessionDatagram(p) && binary.LittleEndian.Uint32(p[6:10]) == id {
				return nil // the power-up's answer is lost
			}
			return [][]byte{p}
		}
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 1, gated, "the re-login asked the gate")
	require.Contains(t, b.Commands(), ipmitest.PowerUp, "the first power-up reached the BMC")
	require.Eventually(t, hw.HardwareOn, 5*time.Second, 10*time.Millisecond, "the BMC applied it")
	assert.NotErrorIs(t, err, power.ErrBackoff,
		"a power-on the BMC received and applied is reported as a login not tried: %v", err)
	assert.NotErrorIs(t, err, power.ErrNotSent, "%v", err)
}
