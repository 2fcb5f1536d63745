package power_test

import (
	"context"
	"crypto/x509"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// clockTarget reaches system id of the chassis at srv under its own login
// identity, the adapter's windows measured on clk.
func clockTarget(srv *httptest.Server, clk *manualClock, id, login string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return power.Target{BMC: srv.URL, Config: login, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin",
			Password: bmcPassword, RootCAs: pool, Now: clk.Now})
	}}
}

// TestReview35ad_EvictedSessionForgetsPressWindowPoweringFencedHostOn
// (review round 30, the round-29 reviewer's suspicion proved through the
// Pool): power/redfish refuses a PushPowerButton for a power-off within
// SoftTimeout + StaleReads of its previous press, because an On read
// then may be an echo of the state before that shutdown and a press
// would power on a host that is off. That window lives in the
// Controller (lastOffPush); only the window of an unanswered POST is
// kept per endpoint and system (lostWindows). The Pool replaces a host's
// Controller whenever its session goes: here neighbours' logins evict
// host A's idle session (MaxSessions 2, issue 35's chassis layout, one
// eviction a LoginInterval), 2 s after A's fence pressed the button. A
// retry of A's fence 45 s after the press (the OS off at 40 s, the BMC's
// reads 20 s stale) gets a new Controller that knows no press, reads On
// and presses again: the fenced host runs again. Ground truth: the fake
// hardware.
func TestReview35ad_EvictedSessionForgetsPressWindowPoweringFencedHostOn(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(clk.Now, fake.PowerConfig{SoftDelay: 40 * time.Second, Report: fake.Report{Stale: 20 * time.Second}})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	b.Quirks.NoGraceful = true // soft off is a press (iLO-like firmware)
	b.AddSystem("2", fake.NewPower(clk.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(clk.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", clockTarget(srv, clk, "1", "secret-a/v1"))
	hb := pool.Controller("b", clockTarget(srv, clk, "2", "secret-b/v1"))
	hc := pool.Controller("c", clockTarget(srv, clk, "3", "secret-c/v1"))

	require.NoError(t, a.Off(ctx, power.ModeSoft), "A's fence: the first press")
	require.Equal(t, []string{"PushPowerButton"}, b.Resets())
	pressAt := clk.Now()

	clk.Advance(time.Second)
	_, err := hb.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = hc.State(ctx) // at the bound: its login's success closes the least recently used idle session, A's
	require.NoError(t, err)
	logins := b.Logins()
	t.Logf("sessions open on the BMC: %d, logins: %d", b.Sessions(), logins)

	clk.Advance(43 * time.Second) // t=45 s: the OS went off at 40 s; reads show t=25 s (On)
	require.False(t, hwA.HardwareOn(), "the press's shutdown is over at 40 s")
	err = a.Off(ctx, power.ModeSoft) // the fence retried (a remediation loop, a second controller's pass)
	offAt := clk.Now()
	t.Logf("A's second Off: %v; logins %d -> %d; resets %v", err, logins, b.Logins(), b.Resets())
	clk.Advance(time.Minute)
	require.False(t, hwA.HardwareOn(),
		"ground truth: host A, fenced by a press at %s and off since 40 s later, runs again: the Pool's new Controller after A's session was evicted forgot the press window and pressed on a stale On read (resets %v)",
		pressAt.Format(time.TimeOnly), b.Resets())
	require.True(t, hwA.WasOffDuring(offAt, clk.Now()))
}

// TestReview35ad_ForgottenHostForgetsResetWindowPoweringFencedHostOn
// (review round 30, the same root cause as above, the other window):
// power/redfish never sends a PushPowerButton "within Config.StaleReads
// of this Controller's previous reset" (the read may echo the state from
// before it). A host fenced with a hard Off (ForceOff, answered: no lost
// window) whose credentials are then rotated (the caller Forgets it and
// hands the Pool its new Target, as issue 35 point 5 requires of the kube
// controller and the executor) gets a new Controller that knows no
// reset: a soft Off 5 s later (the BMC's reads 20 s stale, the soft
// power-off a press on this firmware) reads On, the echo of the state
// before the ForceOff, and presses: the fenced host runs again. The same
// Controller refuses the press (control: without the Forget the host
// stays off). Ground truth: the fake hardware.
func TestReview35ad_ForgottenHostForgetsResetWindowPoweringFencedHostOn(t *testing.T) {
	for _, forget := range []bool{false, true} {
		clk := newClock()
		hw := fake.NewPower(clk.Now, fake.PowerConfig{Report: fake.Report{Stale: 20 * time.Second}})
		b := redfishtest.NewBMC(clk.Now, hw, "admin", bmcPassword)
		b.Quirks.NoGraceful = true
		srv := b.StartTLS()
		t.Cleanup(srv.Close)
		pool := newPool(t, clk, power.PoolConfig{})
		ctx := context.Background()
		a := pool.Controller("a", clockTarget(srv, clk, "1", "secret-a/v1"))
		require.NoError(t, a.Off(ctx, power.ModeHard), "the fence: ForceOff")
		require.Equal(t, []string{"ForceOff"}, b.Resets())
		require.False(t, hw.HardwareOn())
		clk.Advance(time.Second)
		if forget {
			pool.Forget("a") // the host's Secret was rotated
			a = pool.Controller("a", clockTarget(srv, clk, "1", "secret-a/v2"))
		}
		clk.Advance(4 * time.Second)
		err := a.Off(ctx, power.ModeSoft)
		t.Logf("forget=%v: soft Off 5 s after the ForceOff: %v; resets %v", forget, err, b.Resets())
		clk.Advance(time.Minute)
		require.False(t, hw.HardwareOn(),
			"forget=%v: ground truth: the host fenced off 5 s before runs again: a press went out on a stale On read (resets %v)", forget, b.Resets())
	}
}
