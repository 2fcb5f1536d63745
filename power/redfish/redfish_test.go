package redfish_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secret = "s3cr3t-passw0rd"

type rig struct {
	clk *fake.Clock
	hw  *fake.Power
	bmc *redfishtest.BMC
	srv *httptest.Server
	cfg redfish.Config
}

// tb is what *testing.T, *testing.B and *rapid.T offer.
type tb interface {
	Errorf(format string, args ...any)
	FailNow()
	Cleanup(func())
}

func newRig(t tb, q redfishtest.Quirks, hw fake.PowerConfig) *rig {
	clk := fake.NewClock(time.Time{})
	p := fake.NewPower(clk.Real, hw)
	b := redfishtest.NewBMC(clk.Real, p, "admin", secret)
	b.Quirks = q
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	r := &rig{clk: clk, hw: p, bmc: b, srv: srv,
		cfg: redfish.Config{Endpoint: srv.URL, Username: "admin", Password: secret, RootCAs: pool, Now: clk.Real}}
	// The windows are the process's per endpoint (the test's own server
	// may replace the rig's): a later test on a reused port must not see
	// them.
	t.Cleanup(func() { redfish.ForgetWindowsOf(srv.URL); redfish.ForgetWindowsOf(r.cfg.Endpoint) })
	return r
}

func (r *rig) connect(t tb) *redfish.Controller {
	c, err := redfish.Connect(context.Background(), r.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var ctx = context.Background()

func TestModesAndStates(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{Lag: 5 * time.Second, SoftDelay: 10 * time.Second})
	c := r.connect(t)
	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)

	require.NoError(t, c.Off(ctx, power.ModeSoft))
	r.clk.Advance(12 * time.Second)
	s, _ = c.State(ctx)
	assert.Equal(t, power.StateTransitioning, s, "PoweringOff")
	r.clk.Advance(5 * time.Second)
	s, _ = c.State(ctx)
	assert.Equal(t, power.StateOff, s)

	require.NoError(t, c.Off(ctx, power.ModeHard), "already off: success")
	require.NoError(t, c.On(ctx))
	r.clk.Advance(5 * time.Second)
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.Equal(t, []string{"GracefulShutdown", "ForceOff", "On", "ForceOff"}, r.bmc.Resets(),
		"a non-toggling power-off is sent even when the state reads Off")
	require.NoError(t, c.On(ctx))
	r.clk.Advance(5 * time.Second)
	require.NoError(t, c.On(ctx), "already on: success")
	assert.Len(t, r.bmc.Resets(), 5, "no On reset for a system that reads On")
}

// Issue 24, point 4: the adapter skipped a power-off when its own read said
// Off, and that read can be a stale echo of a host that was powered on out
// of band a moment ago; the caller was told the power-off succeeded while
// the host ran. A non-toggling power-off is now sent whatever the read
// says, and one is sent on an unknown read too (it can power nothing on).
func TestRegressionStaleOffReadDoesNotSkipPowerOff(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{Initial: power.StateOff, Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	c := r.connect(t)
	r.clk.Advance(10 * time.Second)
	r.hw.OutOfBandOn() // a person powers the host on; the BMC says Off for 5 s more
	r.clk.Advance(time.Second)
	s, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, power.StateOff, s, "the emulator should echo the old state")
	require.NoError(t, c.Off(ctx, power.ModeHard))
	assert.Equal(t, []string{"ForceOff"}, r.bmc.Resets())
	assert.False(t, r.hw.HardwareOn(), "the host powered on out of band still runs")

	u := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{Report: fake.Report{Unknown: 1}})
	uc := u.connect(t)
	require.NoError(t, uc.Off(ctx, power.ModeHard), "a ForceOff needs no known state")
	assert.Equal(t, []string{"ForceOff"}, u.bmc.Resets())
	assert.False(t, u.hw.HardwareOn())
}

func TestVendorQuirks(t *testing.T) {
	tests := []struct {
		name  string
		q     redfishtest.Quirks
		mode  power.Mode
		reset string
	}{
		{"iLO 5: no Graceful*, soft off is PushPowerButton", redfishtest.Quirks{NoGraceful: true}, power.ModeSoft, "PushPowerButton"},
		{"Supermicro: malformed GracefulShutdownGracefulRestart", redfishtest.Quirks{MalformedAllowable: true}, power.ModeSoft, "GracefulShutdown"},
		{"lowercase allowable values", redfishtest.Quirks{Lowercase: true}, power.ModeHard, "forceoff"},
		{"allowable values behind ActionInfo", redfishtest.Quirks{ActionInfo: true}, power.ModeSoft, "GracefulShutdown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.q, fake.PowerConfig{})
			c := r.connect(t)
			require.NoError(t, c.Off(ctx, tt.mode))
			assert.Equal(t, []string{tt.reset}, r.bmc.Resets())
			assert.Equal(t, power.StateOff, r.hw.Current())
		})
	}
}

func TestErrorClasses(t *testing.T) {
	tests := []struct {
		status int
		want   error
	}{
		{400, power.ErrUnsupported}, {405, power.ErrUnsupported}, {501, power.ErrUnsupported},
		{409, power.ErrBusy}, {503, power.ErrBusy}, {500, power.ErrFailed}, {403, power.ErrFailed},
	}
	for _, tt := range tests {
		r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
		c := r.connect(t)
		r.bmc.FailNextReset(tt.status, false)
		err := c.Off(ctx, power.ModeHard)
		assert.ErrorIs(t, err, tt.want, "status %d", tt.status)
		var pe *power.Error
		require.True(t, errors.As(err, &pe))
		assert.Equal(t, tt.status, pe.Status)
		assert.Contains(t, pe.Message, "injected failure", "the Redfish message is kept")
		assert.NotContains(t, err.Error(), secret)
	}
}

func TestIDRACBusyAfterPowerOff(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{BusyAfterOff: time.Minute}, fake.PowerConfig{})
	c := r.connect(t)
	require.NoError(t, c.Off(ctx, power.ModeHard))
	err := c.On(ctx)
	assert.ErrorIs(t, err, power.ErrBusy)
	r.clk.Advance(61 * time.Second)
	require.NoError(t, c.On(ctx))
}

func TestConflictThatReachedTargetIsSuccess(t *testing.T) {
	for _, status := range []int{400, 409} {
		r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
		c := r.connect(t)
		// Refused, and nothing happened: an error.
		r.bmc.FailNextReset(status, false)
		assert.Error(t, c.Off(ctx, power.ModeHard))
		assert.Equal(t, power.StateOn, r.hw.Current())
		// Refused, but the server went off: the re-read makes it success.
		r.bmc.FailNextReset(status, true)
		require.NoError(t, c.Off(ctx, power.ModeHard), "status %d", status)
		assert.Equal(t, power.StateOff, r.hw.Current())
	}
}

func TestSessionExpiryAndLogout(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{SessionRequests: 3}, fake.PowerConfig{})
	c, err := redfish.Connect(ctx, r.cfg)
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := c.State(ctx)
		require.NoError(t, err, "pass %d: the session is re-established", i)
	}
	require.NoError(t, c.Close())
	assert.Zero(t, r.bmc.Sessions(), "logged out; expired sessions are gone")
}

func TestTLSAndCredentials(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	cfg := r.cfg
	cfg.RootCAs = nil
	_, err := redfish.Connect(ctx, cfg)
	require.Error(t, err, "the test server's certificate is not trusted by default")
	assert.NotContains(t, err.Error(), secret)
	cfg.InsecureSkipVerify = true
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err, "unless the caller opts out")
	_ = c.Close()

	cfg = r.cfg
	cfg.Password = "wrong-" + secret
	_, err = redfish.Connect(ctx, cfg)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)

	cfg = r.cfg
	cfg.Endpoint = strings.Replace(r.srv.URL, "https://", "https://admin:"+secret+"@", 1)
	_, err = redfish.Connect(ctx, cfg)
	assert.ErrorIs(t, err, redfish.ErrConfig)
	assert.NotContains(t, err.Error(), secret)

	cfg = r.cfg
	cfg.BasicAuth = true
	c, err = redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	assert.Zero(t, r.bmc.Sessions(), "basic auth opens no session")
}

func TestContextPerOperation(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	cctx, cancel := context.WithCancel(ctx)
	c, err := redfish.Connect(cctx, r.cfg)
	require.NoError(t, err)
	cancel() // the connect context is gone; operations use their own
	s, err := c.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, power.StateOn, s)
	dead, stop := context.WithCancel(ctx)
	stop()
	_, err = c.State(dead)
	assert.Error(t, err)
	_ = c.Close()
}

func TestRequestsPerOperation(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	count := func(f func()) int {
		before := r.bmc.Requests()
		f()
		return r.bmc.Requests() - before
	}
	assert.Equal(t, 1, count(func() { _, _ = c.State(ctx) }), "state")
	// A ForceOff is sent without a read (TestReview35ab_BlindForceOffNeverSentWhileSystemReadHangs).
	assert.Equal(t, 1, count(func() { _ = c.Off(ctx, power.ModeHard) }), "power-off")
	assert.Equal(t, 1, count(func() { _ = c.Off(ctx, power.ModeHard) }), "power-off when off: the ForceOff is sent all the same")
	assert.Equal(t, 2, count(func() { _ = c.On(ctx) }), "power-on")
	assert.Equal(t, 1, count(func() { _ = c.On(ctx) }), "power-on when on")
}

func TestSystemSelection(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	cfg := r.cfg
	cfg.SystemID = "2"
	_, err := redfish.Connect(ctx, cfg)
	assert.ErrorIs(t, err, power.ErrFailed)
	cfg.SystemID = "1"
	c, err := redfish.Connect(ctx, cfg)
	require.NoError(t, err)
	_ = c.Close()
	_, err = redfish.Connect(ctx, redfish.Config{Endpoint: "ftp://x"})
	assert.ErrorIs(t, err, redfish.ErrConfig)
}
