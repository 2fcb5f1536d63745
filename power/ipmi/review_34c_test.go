package ipmi_test

// Review 34, third round: what is still wrong after the fixes of the
// second round (review_34b_test.go).

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

// TestReview34_LostSoftShutdownNotPressedAgainOnAnEcho: the second
// round's fix sends a soft shutdown whose answer was lost again on the
// new session "only after a fresh read says on". That read comes a few
// hundred milliseconds after the first soft shutdown, which the BMC may
// have carried out (only its answer was lost), and doc.go itself says a
// read right after a change may show the state from before it. The reboot
// package, for a Toggler, allows a press only on an On reading taken
// SoftTimeout + StaleReads after its last power-off (reboot/toggle.go
// pressWait); the adapter's internal resend bypasses that rule. On a BMC
// that presses the power button for a soft shutdown (fake.ButtonSoft)
// and reads the power-good line late (Report.Stale), a lost answer makes
// the second soft shutdown a press on a host the first one turned off:
// the host is powered on again, and Off(soft) even reports success.
// Ground truth: the fake.Power's hardware, and the BMC's command log
// (two soft shutdowns). Root cause: ipmi.go change(), the resend path
// `if sent && ctl == chassisSoftShutdown { on, err := chassisOn(...)`
// trusts one read of on right after a soft shutdown that may have been
// applied. Fix: after a lost soft shutdown answer, send nothing more and
// return busy (the caller reads the state over time and decides).
func TestReview34_LostSoftShutdownNotPressedAgainOnAnEcho(t *testing.T) {
	ctx := context.Background()
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn, Button: fake.ButtonSoft, SoftDelay: 50 * time.Millisecond,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
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
			// to the soft shutdown (carried out by the BMC) is lost.
			answers++
			if answers > 1 {
				return nil
			}
		}
		return [][]byte{q}
	}
	m.mu.Unlock()

	err = c.Off(ctx, power.ModeSoft)
	soft := 0
	for _, cmd := range b.Commands() {
		if cmd == ipmitest.SoftOff {
			soft++
		}
	}
	t.Logf("Off(soft): %v; soft shutdowns at the BMC: %d; truth: %v", err, soft, hw.Truth())
	assert.Equal(t, 1, soft, "a soft shutdown was sent again after a read of on that echoes the state from before the first one")
	assert.False(t, hw.HardwareOn(), "the second soft shutdown pressed the power button of the host the first one turned off: it runs again (Off returned %v)", err)
}
