package power_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_BrokenBladeBacksOffNeighboursLogin: behind one Redfish
// service for systems 1..3 (a chassis manager), blade 2's
// ComputerSystem resource answers 500 (a blade whose management
// controller is broken; the service and the other blades are fine). Host
// B (blade 2) is read first: its Connect logs in (the BMC accepts the
// credentials: its own login log says so), then fails to read system 2.
// The Pool counts that as a failed LOGIN of the credentials and backs
// them off, doubling at each of B's reads: host A (blade 1), same
// credentials, no session, is refused "login not tried" (ErrBackoff), a
// fence of A not sent, for 64 s after B's 7th read (up to MaxBackoff,
// 2 min), although every login the BMC saw was accepted. The doc
// names ErrNoSystem as the one Connect failure that is the host's own
// "whose login the BMC's authenticated answer proved"; a 500 on the
// host's own system after an accepted login is no less the host's own.
// Ground truth: the BMC's login log (every login accepted) and blade 1's
// power (A's fence never reached it).
func TestReview35_BrokenBladeBacksOffNeighboursLogin(t *testing.T) {
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw1, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redfish/v1/Systems/2" || r.URL.Path == "/redfish/v1/Systems/2/" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InternalError","message":"blade 2 does not answer"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	// B is read every few minutes (its health is watched); A, not read
	// meanwhile, has no session.
	bc := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	var err error
	for range 7 {
		clk.Advance(3 * time.Minute) // past any back-off
		_, err = bc.State(ctx)
		require.Error(t, err, "blade 2 is broken")
	}
	t.Logf("B: %v", err)

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	err = a.Off(ctx, power.ModeHard) // the fence of A
	for _, l := range b.LoginLog() {
		require.True(t, l.OK, "ground truth: the BMC accepted every login with these credentials")
	}
	assert.NoError(t, err, "A's fence was refused for blade 2's failure although the BMC accepted the credentials")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	assert.False(t, hw1.HardwareOn(), "ground truth: blade 1 is still powered")
}
