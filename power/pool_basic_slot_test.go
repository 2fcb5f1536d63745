package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolBasicAuthTakesNoSlot (review round 17, finding 4): a BasicAuth
// host opens no session on the BMC, so it must not count against
// MaxSessions: with the bound (1) held by host A's session, a working
// BasicAuth host M read alongside A every 5 s for 5 minutes must never
// close A's session. Before the fix M's first login went over the bound
// as a probe and its success trimmed A's idle session; A then closed
// M's, and so on: A logged in again each LoginInterval. Ground truth: the
// emulator's session logins (A's only).
func TestPoolBasicAuthTakesNoSlot(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	m := pool.Controller("m", basicTarget(srv, "2", bmcPassword))
	for step := 0; step < 60; step++ {
		_, err := a.State(ctx)
		require.NoError(t, err, "host A (session login) at step %d", step)
		_, err = m.State(ctx)
		require.NoError(t, err, "host M (BasicAuth) at step %d", step)
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	assert.Equal(t, 1, b.Logins(), "host A's session was closed for a BasicAuth host, which opens no session on the BMC")
}
