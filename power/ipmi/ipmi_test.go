package ipmi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	user = "admin"
	pass = "s3cret-Pa55"
)

func newBMC(t testing.TB, cfg fake.PowerConfig) (*ipmitest.BMC, *fake.Power) {
	t.Helper()
	return newBMCOn(t, time.Now, cfg)
}

func newBMCOn(t testing.TB, now func() time.Time, cfg fake.PowerConfig) (*ipmitest.BMC, *fake.Power) {
	t.Helper()
	p := fake.NewPower(now, cfg)
	b, err := ipmitest.NewBMC(p, ipmitest.Config{Username: user, Password: pass})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b, p
}

func connect(t testing.TB, b *ipmitest.BMC) *ipmi.Controller {
	t.Helper()
	c, err := ipmi.Connect(context.Background(), ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestStatesAndModes(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)

	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)

	require.NoError(t, c.On(ctx), "already on: success without a command")
	assert.NotContains(t, b.Commands(), ipmitest.PowerUp)

	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.False(t, p.HardwareOn())
	s, err = c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOff, s)

	require.NoError(t, c.Off(ctx, power.ModeSoft), "already off: no soft shutdown (it may press the button)")
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.Equal(t, []string{ipmitest.Status, ipmitest.Status, ipmitest.PowerDown, ipmitest.Status, ipmitest.Status, ipmitest.PowerDown}, b.Commands(),
		"power down is sent whatever the state reads: an off read may be a stale echo")

	require.NoError(t, c.On(ctx))
	assert.True(t, p.HardwareOn())
	require.NoError(t, c.Off(ctx, power.ModeSoft))
	assert.False(t, p.HardwareOn(), "the OS shut down at once (no SoftDelay)")
	cmds := b.Commands()
	assert.Equal(t, ipmitest.SoftOff, cmds[len(cmds)-1])
}

// Issue 24, point 4: the adapter skipped power down when its own read said
// off, and that read can be an echo of a host powered on out of band a
// moment ago (a BMC that reads the power-good line late): the caller was
// told the power-off succeeded while the host ran.
func TestRegressionStaleOffReadDoesNotSkipPowerDown(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	b, p := newBMCOn(t, clk.Real, fake.PowerConfig{Initial: power.StateOff, Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	c := connect(t, b)
	clk.Advance(10 * time.Second)
	p.OutOfBandOn()
	clk.Advance(time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s, "the emulator should echo the old state")
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.Contains(t, b.Commands(), ipmitest.PowerDown)
	assert.False(t, p.HardwareOn(), "the host powered on out of band still runs")
}

func TestSoftShutdownIgnored(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{IgnoreSoft: true})
	c := connect(t, b)
	require.NoError(t, c.Off(ctx, power.ModeSoft), "IPMI cannot tell whether the OS honoured it")
	assert.True(t, p.HardwareOn())
	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s, "the caller sees it is still on and falls back to hard")
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.False(t, p.HardwareOn())
}

func TestCompletionCodes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cc    uint8
		class power.Class
	}{
		{0xC1, power.ClassUnsupported}, {0xD5, power.ClassUnsupported}, {0xC9, power.ClassUnsupported},
		{0xC0, power.ClassBusy}, {0xC3, power.ClassBusy}, {0xC4, power.ClassBusy}, {0xD2, power.ClassBusy},
		{0xFF, power.ClassFailed}, {0xD4, power.ClassFailed}, {0x81, power.ClassFailed},
	} {
		b, p := newBMC(t, fake.PowerConfig{})
		c := connect(t, b)
		b.FailNext(ipmitest.PowerDown, tc.cc, false)
		err := c.Off(ctx, power.ModeHard)
		require.Error(t, err)
		assert.Equal(t, tc.class, power.Classify(err), "cc %#x: %v", tc.cc, err)
		var pe *power.Error
		require.True(t, errors.As(err, &pe))
		assert.Equal(t, int(tc.cc), pe.Status)
		assert.Contains(t, err.Error(), "completion code")
		assert.True(t, p.HardwareOn(), "not applied")

		b.FailNext(ipmitest.Status, tc.cc, false)
		s, err := c.State(ctx)
		assert.Equal(t, power.StateUnknown, s, "a failed read is unknown, never guessed")
		assert.Equal(t, tc.class, power.Classify(err))
	}
}

// An unknown read (CEh) is reported as unknown, never guessed; a power-off
// is sent all the same, since none of the chassis commands toggles (issue
// 24: a fence is not held up by a BMC that cannot tell).
func TestUnknownReadIsNotGuessed(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{Report: fake.Report{Unknown: 1}})
	c := connect(t, b)
	s, err := c.State(ctx)
	assert.Equal(t, power.StateUnknown, s)
	assert.ErrorIs(t, err, power.ErrBusy)
	assert.NoError(t, c.Off(ctx, power.ModeHard), "power down sent on an unknown state")
	assert.False(t, p.HardwareOn())
	assert.Contains(t, b.Commands(), ipmitest.PowerDown)
	assert.NoError(t, c.Off(ctx, power.ModeHard), "and again: it powers nothing on")
	assert.False(t, p.HardwareOn())
}

func TestSessionReopenedAfterBMCReset(t *testing.T) {
	ctx := context.Background()
	b, p := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	_, err := c.State(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Restart()) // every session lost
	require.NoError(t, c.Off(ctx, power.ModeHard), "a new session, once")
	assert.False(t, p.HardwareOn())
	require.NoError(t, b.Close())
	_, err = c.State(ctx)
	assert.ErrorIs(t, err, power.ErrBusy, "no answer at all: busy")
}

func TestNoCredentialsInErrors(t *testing.T) {
	ctx := context.Background()
	b, _ := newBMC(t, fake.PowerConfig{})
	_, err := ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: "wrong-" + pass, Timeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.ErrorIs(t, err, power.ErrFailed)
	assert.ErrorIs(t, err, power.ErrAuth, "a wrong password is a refused login")
	assert.NotContains(t, err.Error(), pass)
	assert.NotContains(t, err.Error(), user)

	_, err = ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: strings.Repeat("u", 40), Password: pass})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), strings.Repeat("u", 40))

	_, err = ipmi.Connect(ctx, ipmi.Config{Host: b.Host(), Port: b.Port(), Username: user, Password: pass, CipherSuite: -1})
	assert.ErrorIs(t, err, ipmi.ErrConfig)
}

func TestContextAndClose(t *testing.T) {
	b, _ := newBMC(t, fake.PowerConfig{})
	c := connect(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.State(ctx)
	assert.Error(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "twice is fine")
	_, err = c.State(context.Background())
	assert.ErrorIs(t, err, ipmi.ErrClosed)
}
