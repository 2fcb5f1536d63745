package power_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolJoinRefusedForOwnSystemLogsNoOneIn (issue 35, review round 14,
// with TestReview35_OneSystemsRefusalBacksOffNeighboursJoin): a chassis
// service answers 401 to every request for system 2 while the shared
// session reads the Systems collection and systems 1 and 3. Host B
// (system 2) joining host A's session is refused for its own system: no
// expiry of the session, so no re-login (which would also log A's session
// token out), however often B retries; B alone backs off, and A's session
// keeps serving A. Ground truth: the emulator's login count.
func TestPoolJoinRefusedForOwnSystemLogsNoOneIn(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	bc := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	for range 5 {
		clk.Advance(5 * time.Minute) // past B's own back-off
		_, err = bc.State(ctx)
		require.Error(t, err, "system 2 refuses every request")
		assert.NotErrorIs(t, err, power.ErrAuth, "the BMC accepted these credentials: system 2's refusal is B's own")
		_, err = a.State(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, b.Logins(), "B's refusals are no expired session: one login, A's")
}
