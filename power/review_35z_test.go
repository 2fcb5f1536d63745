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

// hangingSystem serves b, but a read of system id hangs until the request
// is given up (a dead blade behind a live chassis manager).
func hangingSystem(b *redfishtest.BMC, id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/"+id) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35_JoinedKeptSessionRefusesEvictedHost (review round 17,
// issue 35 point 1): the bound (2) is held by working hosts A (system 1)
// and C (system 2), own logins, idle. Host B1 (login b, proven by an
// earlier try) names system 9, not on the chassis: its retry closes A's
// idle session (the endpoint's eviction for LoginInterval), logs in, and
// its session is kept, serving no host. Round 17 says A's next call closes
// that kept session "at any time, not counted". But host B2 (login b too,
// system 3 on a dead blade: its reads hang) is joining the kept session
// at that moment, and a session being joined is no candidate: the only
// idle one is C's, the eviction is spent, and A's fence is refused
// (busy) at once, although A's session was open a moment ago and its
// credentials work. Ground truth: A's hardware and the emulator's reset
// log.
func TestReview35_JoinedKeptSessionRefusesEvictedHost(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(hangingSystem(b, "3"))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 3 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))
	b1 := pool.Controller("b1", loginTarget(srv, "9", "secret-b/v1"))
	b2 := pool.Controller("b2", loginTarget(srv, "3", "secret-b/v1"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = c.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = b1.State(ctx) // first login: over the bound, logged out
	require.ErrorIs(t, err, power.ErrAfterLogin)
	clk.Advance(3 * time.Second)
	_, err = b1.State(ctx) // evicts A's idle session; its session is kept
	require.ErrorIs(t, err, power.ErrAfterLogin)
	logins := b.Logins()

	joined := make(chan error, 1)
	go func() { _, err := b2.State(ctx); joined <- err }() // joins the kept session; its read hangs
	time.Sleep(300 * time.Millisecond)
	clk.Advance(time.Second)

	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = a.Off(actx, power.ModeHard)
	t.Logf("A's fence: %v; logins %d -> %d", err, logins, b.Logins())
	assert.NoError(t, err, "host A's fence was refused: its session was closed for B1's futile login, and B2's join holds the kept session")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	assert.Equal(t, []string{"ForceOff"}, b.Resets(), "A's fence never reached the BMC")
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A (system 1) is still powered")
	t.Logf("B2's join: %v", <-joined)
}
