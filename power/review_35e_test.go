package power_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_TransientSystem401OnAttachFencesNeighbourOut: blades 1 and
// 2 behind one service, the same (right) BasicAuth credentials. Host A has
// an open, working controller. Host B's first call attaches to A's shared
// session, and the BMC answers that one GET of /Systems/2 with a 401 (a
// transient refusal: the BMC answers 200 to the same credentials on
// every other request, A's included). Since 72c773f, Pool.attach takes
// any ErrAuth met while joining as "the shared session's credentials no
// longer work": it retires A's open session and backs the login off for
// AuthBackoff (30 s, doubling). Host A, whose credentials are right and
// whose session was open, is then refused (ErrBackoff) for State and for
// a hard Off (a fence), against the package doc: "Calls on an open
// session are always tried, whatever any login's back-off: one host's
// ... failure never refuses another host ... whose session is open".
// Ground truth: the emulator's own hardware of system 1 stays on.
func TestReview35_TransientSystem401OnAttachFencesNeighbourOut(t *testing.T) {
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, newClock(), power.PoolConfig{}) // the clock stands still: any back-off holds
	ctx := context.Background()

	a := pool.Controller("a", basicTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.True(t, hwA.HardwareOn())

	b.FailNextGet("/redfish/v1/Systems/2", http.StatusUnauthorized, "") // one transient 401 on B's system
	hostB := pool.Controller("b", basicTarget(srv, "2", bmcPassword))
	_, _ = hostB.State(ctx)

	_, err = a.State(ctx)
	assert.NoError(t, err, "host A's open session was retired and its call refused after B's one 401")
	err = a.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "the fence of host A (right credentials, open session) was refused after B's one 401")
	assert.False(t, hwA.HardwareOn(), "ground truth: system 1 is still on after its fence")
}

// TestReview35_SharedReloginRefusalCountedTwice: blades 1 and 2, one
// session-auth login. A's session expires on the BMC while the password is
// rotated there. Host B's attach finds the session expired (401), and
// power/redfish's share re-logs in through the Pool's gate: the BMC
// refuses that one login; the gate's done records it (failedLocked), and
// then Pool.attach (72c773f) records the same refusal again. One refused
// login thus counts as two in a row: the first pause is 2×AuthBackoff
// (60 s), where the doc says AuthBackoff (30 s) after an authentication
// failure, doubling with each further one. With the rotation undone on the
// BMC at 31 s, host A's call is still refused. Ground truth: the
// emulator's log holds one refused login.
func TestReview35_SharedReloginRefusalCountedTwice(t *testing.T) {
	b, srv, _ := chassis(t, 2)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	b.Quirks.SessionRequests = 1 // A's session expires at its next request (the server is idle)
	b.SetCredentials("admin", "rotated")

	hostB := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	_, err = hostB.State(ctx)
	require.ErrorIs(t, err, power.ErrAuth)
	refused := 0
	for _, l := range b.LoginLog() {
		if !l.OK {
			refused++
		}
	}
	require.Equal(t, 1, refused, "ground truth: the BMC refused one login")

	b.SetCredentials("admin", bmcPassword) // the rotation is undone
	b.Quirks.SessionRequests = 0
	clk.Advance(31 * time.Second) // past AuthBackoff after one refusal
	_, err = a.State(ctx)
	assert.NoError(t, err, "31 s after one refused login (AuthBackoff 30 s), host A's login is still not tried")
}

// TestReview35_SessionLoginAcceptedThen401OnSystemBacksOffLogin: with
// session auth, a login the BMC accepted (a session made: the emulator's
// own log says the credentials are right) followed by one transient 401
// on the GET of the host's system is, since 72c773f, reported by
// redfish.discover as ErrAuth ("refused credentials, whatever the listing
// says"), and the Pool counts it as a refused login: AuthBackoff (30 s,
// doubling to 30 min) for every host with these credentials that has no
// open session. The next call, a fence, is refused although the BMC never
// refused the credentials. Before 72c773f the 401 fell through to the
// listing and the host was found. Ground truth: the emulator's login log
// (every login accepted) and system 1's hardware, still on.
func TestReview35_SessionLoginAcceptedThen401OnSystemBacksOffLogin(t *testing.T) {
	b, srv, hw := chassis(t, 2)
	pool := newPool(t, newClock(), power.PoolConfig{}) // the clock stands still: any back-off holds
	ctx := context.Background()

	b.FailNextGet("/redfish/v1/Systems/1", http.StatusUnauthorized, "") // one transient 401, after the login
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, _ = a.State(ctx)
	for _, l := range b.LoginLog() {
		require.True(t, l.OK, "ground truth: the BMC accepted every login")
	}
	err := a.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "the fence was refused after a login the BMC accepted")
	assert.False(t, hw[0].HardwareOn(), "ground truth: system 1 is still on after its fence")
	c := pool.Controller("c", systemTarget(srv, "2", bmcPassword))
	_, err = c.State(ctx)
	assert.NoError(t, err, "host C (right credentials) is refused after A's accepted login")
}
