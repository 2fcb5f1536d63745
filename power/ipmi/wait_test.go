package ipmi_test

// How long a step waits, and what it sends again: a RAKP step after an
// answer that does not verify, and a soft shutdown whose answer is lost.

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

// TestRAKPForgeryFloodDoesNotExtendTheStep: the BMC's RAKP 2 never comes
// (dropped), and an injector floods the console with made-up RAKP 2s for
// 4 s. The step sends RAKP 1 once (no resend after an answer that failed),
// waits its full time ((Retries+1)×Timeout = 400 ms, not one Timeout
// after the forgery) and then ends, long before the flood does: no
// forgery extends the wait.
func TestRAKPForgeryFloodDoesNotExtendTheStep(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
	m := newMITM(t, b.Addr())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	rakp1s := 0
	m.mu.Lock()
	m.toBMC = func(q []byte) bool {
		if payloadType(q)&0x3f == 0x12 {
			rakp1s++
			if rakp1s == 1 {
				id, peer := m.consoleID, m.peer
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					end := time.After(4 * time.Second)
					for {
						select {
						case <-stop:
							return
						case <-end:
							return
						case <-tick.C:
							m.inject(peer, forgedRAKP2(id, 0))
						}
					}
				}()
			}
		}
		return true
	}
	m.toClient = func(q []byte) [][]byte {
		if payloadType(q)&0x3f == 0x13 {
			return nil // the BMC's RAKP 2 is lost
		}
		return [][]byte{q}
	}
	m.mu.Unlock()
	host, port := m.addr()
	start := time.Now()
	_, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond, Retries: 1})
	took := time.Since(start)
	require.Error(t, err)
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "the step ended before its time was up: %v", err)
	assert.Less(t, took, 3*time.Second, "the flood of forgeries extended the step's wait")
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Equal(t, 1, rakp1s, "RAKP 1 was sent again after an answer that did not verify")
}

// TestSoftShutdownLostAnswerIsSentOnce: the soft shutdown's answer is
// lost (the OS ignores it, the host runs); it is not sent again, on that
// session or another (a second may be a press of the power button on a
// host the first turned off, and no read right after can tell), and Off
// says busy, not success. (Review 34's second round made it send again
// after a read of on; its third round showed that read may be an echo:
// TestReview34_LostSoftShutdownNotPressedAgainOnAnEcho.)
func TestSoftShutdownLostAnswerIsSentOnce(t *testing.T) {
	ctx := context.Background()
	b, hw := newBMC(t, fake.PowerConfig{Initial: power.StateOn, IgnoreSoft: true})
	m := newMITM(t, b.Addr())
	host, port := m.addr()
	c, err := ipmi.Connect(ctx, ipmi.Config{Host: host, Port: port, Username: user, Password: pass,
		Timeout: 200 * time.Millisecond, Retries: 2})
	require.NoError(t, err)
	defer c.Close()
	m.mu.Lock()
	first, answers, sent1 := m.consoleID, 0, 0
	m.toBMC = func(q []byte) bool {
		if m.consoleID == first && m.active && sessionDatagram(q) {
			sent1++ // 1: the read; 2: the soft shutdown; then Close Session
		}
		return true
	}
	m.toClient = func(q []byte) [][]byte {
		if m.consoleID == first && sessionDatagram(q) {
			answers++
			if answers > 1 {
				return nil
			}
		}
		return [][]byte{q}
	}
	m.mu.Unlock()

	start := time.Now()
	err = c.Off(ctx, power.ModeSoft)
	require.Error(t, err)
	assert.Equal(t, power.ClassBusy, power.Classify(err), "%v", err)
	assert.GreaterOrEqual(t, time.Since(start), 600*time.Millisecond, "the lost answer was not waited for the step's full time")
	n := 0
	for _, cmd := range b.Commands() {
		if cmd == ipmitest.SoftOff {
			n++
		}
	}
	assert.Equal(t, 1, n, "one soft shutdown in all: the lost one")
	m.mu.Lock()
	assert.LessOrEqual(t, sent1, 3, "the first session sent more than the read, one soft shutdown and Close Session")
	m.mu.Unlock()
	assert.True(t, hw.HardwareOn())
}
