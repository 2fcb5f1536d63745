package power_test

import (
	"context"
	"crypto/x509"
	"net/http/httptest"
	"testing"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noKeepTarget is systemTarget for an adapter that never hands a session
// over (ConnectInfo.KeepSession cleared): a login whose system is not
// found is logged out, and the next host of the login must log in.
func noKeepTarget(srv *httptest.Server, id, password string) power.Target {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return power.Target{BMC: srv.URL, Config: "admin/" + password, Connect: func(ctx context.Context) (power.Controller, error) {
		ci := power.ConnectInfoFrom(ctx)
		ci.KeepSession = false
		ctx = power.WithConnectInfo(ctx, ci)
		return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: password, RootCAs: pool})
	}}
}

// TestReview35_NeighbourMissingSystemBacksOffLogin: behind one Redfish
// service (a chassis) hosts A (system 1) and B (system 9, not on the
// chassis: a blade pulled while its host object remains) use the same,
// correct credentials. B's call logs in, finds no system 9, and fails; the
// Pool counts that as a failed login of the credentials and backs them
// off, so A's hard power-off (a fence) a moment later is refused with
// ErrBackoff and never sent, although A's credentials and system are
// fine. The same failure through a shared session (attach) is "the host's
// own failure, no back-off" (pool_login.go): only the order of the calls
// decides whether A is fenced. Ground truth: A's hardware (fake.Power) and
// the emulator's login log and reset log.
//
// Two layouts: B's login's session is kept (power/redfish hands it over,
// review round 16: hosts whose systems are all missing must not log in
// each for ever) and A joins it; or no session is kept (an adapter that
// does not hand it over) and A must log in itself. In both, A's fence
// must be sent under credentials the BMC accepted and carried out. A
// back-off of the login (the round 2 bug) refuses A in both: a join waits
// out the login's back-off as a login does.
func TestReview35_NeighbourMissingSystemBacksOffLogin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(srv *httptest.Server, id, password string) power.Target
		kept   bool
	}{
		{name: "session kept", target: systemTarget, kept: true},
		{name: "no session kept", target: noKeepTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, srv, hw := chassis(t, 2)
			pool := newPool(t, newClock(), power.PoolConfig{})
			ctx := context.Background()

			bad := pool.Controller("b", tc.target(srv, "9", bmcPassword))
			_, err := bad.State(ctx)
			require.Error(t, err, "system 9 is not on the chassis")
			require.NotErrorIs(t, err, power.ErrAuth)
			require.Equal(t, 1, b.Logins())

			a := pool.Controller("a", tc.target(srv, "1", bmcPassword))
			before := len(b.LoginLog())
			err = a.Off(ctx, power.ModeHard)
			assert.NoError(t, err, "host A's fence was refused because host B's system is missing")
			assert.NotErrorIs(t, err, power.ErrBackoff)
			if tc.kept {
				// A joined the session B's login left: no login of its
				// own is needed (issue 35 point 2), and none was refused.
				assert.Equal(t, before, len(b.LoginLog()), "host A logged in although B's login's session was kept for it")
			} else {
				assert.Greater(t, len(b.LoginLog()), before, "host A's login was never tried")
			}
			for i, l := range b.LoginLog() {
				assert.True(t, l.OK, "login %d was refused: the credentials are right", i)
			}
			// The emulator records a reset only once it accepted the
			// request's session: the fence went out under a working one.
			assert.Equal(t, []string{"ForceOff"}, b.Resets(), "host A's fence never reached the BMC under an accepted session")
			s, _ := hw[0].State(ctx)
			assert.Equal(t, power.StateOff, s, "host A (system 1) is still powered: the fence was not carried out")
		})
	}
}
