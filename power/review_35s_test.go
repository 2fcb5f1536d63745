package power_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolKeptSessionSpendsNoEviction (issue 35 point 1, found while
// fixing review round 16's missing systems): the BMC's bound is two
// sessions, held by hosts A (system 1) and C (system 2), each with its own
// login, both working. Host B (another login, proven by an earlier try)
// names a system the BMC does not list (or one whose reads fail); its
// retry evicts A's idle session (the endpoint's one eviction for
// LoginInterval), logs in, finds no usable system, and its session is
// kept, serving no host, in the slot A's session freed. A's next call needs a login at the bound: the only idle
// session to close is B's kept one, which serves nobody; if closing it
// counts as an eviction, A is refused (busy) for a minute although its
// credentials work and its session was open a moment ago. Ground truth:
// the emulator's login log and A's hardware.
func TestPoolKeptSessionSpendsNoEviction(t *testing.T) {
	for _, tc := range []struct{ name, system string }{
		{name: "system not found", system: "9"},
		{name: "system failing", system: "3"}, // listed, its reads answer 503 (round 15's kept session)
	} {
		t.Run(tc.name, func(t *testing.T) { keptSessionSpendsNoEviction(t, tc.system) })
	}
}

func keptSessionSpendsNoEviction(t *testing.T, system string) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(failingSystem(b, "3"))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))
	bad := pool.Controller("b", loginTarget(srv, system, "secret-b/v1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = c.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = bad.State(ctx) // its first login: tried over the bound, logged out
	require.ErrorIs(t, err, power.ErrAfterLogin)
	clk.Advance(3 * time.Second) // past B's own back-off
	_, err = bad.State(ctx)      // evicts A's idle session, and its session is kept
	require.ErrorIs(t, err, power.ErrAfterLogin)
	require.Equal(t, 4, b.Logins())

	clk.Advance(time.Second)
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	err = a.Off(actx, power.ModeHard)
	assert.NoError(t, err, "host A's fence was refused: a session that serves no host spent the endpoint's eviction")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	for i, l := range b.LoginLog() {
		assert.True(t, l.OK, "login %d was refused: every login's credentials are right", i)
	}
	s, _ := hw.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A (system 1) is still powered: the fence was not carried out")
	_, err = c.State(ctx)
	assert.NoError(t, err, "host C's session was open and its credentials work")
}
