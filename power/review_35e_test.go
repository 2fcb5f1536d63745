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
	_, err = hostB.State(ctx)
	require.Error(t, err)

	_, err = a.State(ctx)
	assert.NoError(t, err, "host A's open session was retired and its call refused after B's one 401")
	err = a.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "the fence of host A (right credentials, open session) was refused after B's one 401")
	assert.False(t, hwA.HardwareOn(), "ground truth: system 1 is still on after its fence")
}
