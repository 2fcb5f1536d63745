package power_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
// the emulator's login log.
func TestReview35_NeighbourMissingSystemBacksOffLogin(t *testing.T) {
	b, srv, hw := chassis(t, 2)
	pool := newPool(t, newClock(), power.PoolConfig{})
	ctx := context.Background()

	bad := pool.Controller("b", systemTarget(srv, "9", bmcPassword))
	_, err := bad.State(ctx)
	require.Error(t, err, "system 9 is not on the chassis")
	require.NotErrorIs(t, err, power.ErrAuth)

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	before := len(b.LoginLog())
	err = a.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "host A's fence was refused because host B's system is missing")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	assert.Greater(t, len(b.LoginLog()), before, "host A's login was never tried")
	s, _ := hw[0].State(ctx)
	assert.Equal(t, power.StateOff, s, "host A (system 1) is still powered: the fence was not carried out")
}
