package ipmi_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestSuiteRefusalIsNotBusy (issue 34, point 3): a BMC that does not run
// the pinned suite answers Open Session with RMCP+ status 11h (no cipher
// suite match). That is an error of its own (*ipmi.RefusedError, the
// status named, the suites the BMC lists, the fix), of class failed:
// retrying will not help. go-ipmi v0.9.1 made it busy, so callers retried
// for ever and nobody was told to pin another suite.
func TestSuiteRefusalIsNotBusy(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b, err := ipmitest.NewBMC(hw, ipmitest.Config{Username: user, Password: pass, CipherSuites: []uint8{3}})
	require.NoError(t, err)
	defer b.Close()
	_, err = ipmi.Connect(context.Background(), ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass,
		CipherSuite: 17, Timeout: 200 * time.Millisecond})
	require.Error(t, err)
	assert.Equal(t, power.ClassFailed, power.Classify(err), "%v", err)
	assert.False(t, errors.Is(err, power.ErrAuth), "the password was not refused: %v", err)
	var re *ipmi.RefusedError
	require.ErrorAs(t, err, &re)
	// The emulator says 04h (invalid authentication algorithm), ipmi_sim
	// 11h (no cipher suite match): both are "not this suite".
	assert.Contains(t, []uint8{0x04, 0x05, 0x06, 0x07, 0x10, 0x11}, re.Status)
	assert.Equal(t, "Open Session", re.Step)
	assert.Contains(t, err.Error(), re.StatusName())
	assert.Contains(t, err.Error(), "does not run cipher suite 17")
	t.Logf("%v", err)
	if re.Offered != nil { // the emulator may not answer Get Channel Cipher Suites outside a session
		assert.Contains(t, re.Offered, 3)
		assert.Contains(t, err.Error(), "it lists 3")
	} else {
		assert.Contains(t, err.Error(), "pin the other of 3 and 17")
	}
	assert.ErrorIs(t, err, ipmi.ErrRefused)
}

// TestRefusalClasses: each RMCP+ status a BMC may answer the session setup
// with has a class and a fix: a refused account is ErrAuth (failed), no
// free session slot is busy, a missing suite is failed.
func TestRefusalClasses(t *testing.T) {
	for _, tc := range []struct {
		status uint8
		fix    string
	}{
		{0x01, "no free session slot"}, {0x0d, "check the user name"}, {0x11, "does not run cipher suite 3"},
	} {
		e := &ipmi.RefusedError{Step: "Open Session", Status: tc.status, Suite: 3}
		assert.Contains(t, e.Error(), tc.fix)
		assert.Contains(t, e.Error(), "status 0x")
	}
}

// TestConfigErrorIsPowerError (issue 34, point 5): a Config that cannot
// work is a *power.Error of class failed at Connect, like every other
// error of the adapters, and still matches ErrConfig. It was a plain error.
func TestConfigErrorIsPowerError(t *testing.T) {
	for _, cfg := range []ipmi.Config{
		{Host: "127.0.0.1", Username: "a-seventeen-bytes", Password: pass},
		{Host: "127.0.0.1", Username: user, Password: "twenty-one-bytes-long"},
		{Username: user, Password: pass},
		{Host: "127.0.0.1", Username: user, Password: pass, CipherSuite: 1},
		{Host: "127.0.0.1", Username: user, Password: pass, Privilege: "root"},
	} {
		_, err := ipmi.Connect(context.Background(), cfg)
		var pe *power.Error
		require.True(t, errors.As(err, &pe), "%T %v", err, err)
		assert.Equal(t, power.ClassFailed, pe.Class)
		assert.ErrorIs(t, err, ipmi.ErrConfig)
	}
}

// TestClosedIsPowerError: an operation after Close is a *power.Error too.
func TestClosedIsPowerError(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	require.NoError(t, c.Close())
	_, err := c.State(context.Background())
	var pe *power.Error
	assert.True(t, errors.As(err, &pe))
	assert.ErrorIs(t, err, ipmi.ErrClosed)
}

// TestOneSenderPerSession (issue 34, point 4): a Controller starts no
// goroutine of its own (go-ipmi's keep-alive ran on one and shared the
// session's sequence numbers with the adapter's commands): between
// operations nothing is sent, so no answer can match the wrong request.
func TestOneSenderPerSession(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{})
	runtime.GC()
	before := runtime.NumGoroutine()
	c := connect(t, b)
	_, err := c.State(context.Background())
	require.NoError(t, err)
	// The emulator answers from a goroutine per datagram: give those a
	// moment to end.
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(2 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, before, n, "goroutines left running by an open Controller")
	sent := b.Packets()
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, sent, b.Packets(), "datagrams sent between operations")
}
