package ipmi_test

// The scene of the review 34 tests (review_34_test.go, review_34b_test.go):
// an emulated BMC whose reads echo the power of a while ago, a man in the
// middle before it, and a console connected through him.

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

// staleBMC34 is an emulated BMC on a fake clock whose host is initially
// initial and whose reads echo the power of 5 s before (never
// "transitioning"): the clock, the BMC and its hardware.
func staleBMC34(t *testing.T, initial power.State) (*fake.Clock, *ipmitest.BMC, *fake.Power) {
	t.Helper()
	clk := fake.NewClock(time.Time{})
	b, p := newBMCOn(t, clk.Real, fake.PowerConfig{Initial: initial, Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	return clk, b, p
}

// dialVia34 connects a console to the BMC behind m with password, timeout
// and retries; a console that connected is closed at the test's end.
func dialVia34(m *mitm, t *testing.T, password string, timeout time.Duration, retries int) (*ipmi.Controller, error) {
	host, port := m.addr()
	c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: host, Port: port, Username: user, Password: password,
		Timeout: timeout, Retries: retries})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// connectVia34 puts a man in the middle before b and connects a console
// through him (the right password, timeout, retries), which must succeed.
func connectVia34(t *testing.T, b *ipmitest.BMC, timeout time.Duration, retries int) (*ipmi.Controller, *mitm) {
	t.Helper()
	m := newMITM(t, b.Addr())
	c, err := dialVia34(m, t, pass, timeout, retries)
	require.NoError(t, err)
	return c, m
}

// readsOn34 checks that c reads the host on and that it is (ground truth).
func readsOn34(t *testing.T, c *ipmi.Controller, hw *fake.Power) {
	t.Helper()
	s, err := c.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	assert.True(t, hw.HardwareOn())
}

// dropBySession34 makes m decide on each datagram of the console's
// sessions while m is active: keep(session, index) says whether it goes
// on, session counting the sessions opened since the call (0: the one
// open then), index the datagram's place in its session (from 1). Every
// other datagram goes on.
func dropBySession34(m *mitm, keep func(session, index int) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sessions, index, lastID := 0, 0, m.consoleID
	m.toBMC = func(q []byte) bool {
		if m.consoleID != lastID {
			lastID, sessions, index = m.consoleID, sessions+1, 0
		}
		if !m.active || !sessionDatagram(q) {
			return true
		}
		index++
		return keep(sessions, index)
	}
}
