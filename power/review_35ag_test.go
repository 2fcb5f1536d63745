package power_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_DeadBladeBacksOffItsNeighboursLogin (review round 18,
// issue 35 point 1, the Redfish adapter's connect): blades A (system 1)
// and D (system 6) behind one chassis manager share their credentials
// (one Login: one session, one back-off). D's blade is dead: reads of
// its system hang. With no session open (the idle sweep closed it), D's
// read logs in: the BMC accepts the login, the direct read of
// /Systems/6 runs out the whole ConnectTimeout, and the listing that
// follows fails at once on the spent deadline, so the failure is
// reported as the service's (not power.AfterLogin) and the Pool backs
// the whole login off. A's fence a moment later is refused (ErrBackoff)
// although A's system and credentials work. Ground truth: A's hardware
// and the emulator's reset log.
func TestReview35_DeadBladeBacksOffItsNeighboursLogin(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	b.AddSystem("6", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(hangingSystem(b, "6"))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second})
	cp := x509.NewCertPool()
	cp.AddCert(srv.Certificate())
	blade := func(id string) power.Target {
		cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: cp}
		return power.Target{BMC: srv.URL, Config: "sys=" + id, Login: "chassis-creds",
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
	}
	ctx := context.Background()
	a := pool.Controller("a", blade("1"))
	d := pool.Controller("d", blade("6"))
	_, err := d.State(ctx)
	t.Logf("D's read: %v (AfterLogin: %v)", err, errors.Is(err, power.ErrAfterLogin))
	require.Error(t, err)
	err = a.Off(ctx, power.ModeHard)
	t.Logf("A's fence: %v", err)
	assert.NoError(t, err, "host A's fence was refused because its neighbour's blade is dead")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	assert.Equal(t, []string{"ForceOff"}, b.Resets())
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A is still powered")
}
