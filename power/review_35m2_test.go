package power_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closeLog is a controller whose logout is recorded under its login's
// name (ground truth: which sessions the BMC saw logged out).
type closeLog struct {
	power.Controller
	name   string
	mu     *sync.Mutex
	closed *[]string
}

func (c *closeLog) Close() error {
	c.mu.Lock()
	*c.closed = append(*c.closed, c.name)
	c.mu.Unlock()
	return nil
}

// TestReview35_RotatedPasswordEvictsWorkingSessions: the package doc: "A
// login of credentials not yet proven is tried first, one over the bound
// ... a wrong password never closes another host's working session".
// proven is set once and never cleared: credentials that logged in here
// once and whose password was then rotated on the BMC (host B's Secret
// now stale: issue 35's own scenario) log in as "proven" for ever. At the
// bound (default MaxSessions 2, sessions of logins v1 and v2 open and
// idle), each of B's retries, every time its back-off ends, evicts the
// least recently used working session and then fails with ErrAuth: the
// BMC already refused these credentials (back-off running, ErrAuth the
// last failure), and still a working session of hosts whose credentials
// are right is logged out for them, every back-off period for as long as
// the Secret stays stale. Ground truth: the controllers' logouts.
func TestReview35_RotatedPasswordEvictsWorkingSessions(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: 24 * time.Hour}) // no idle close in this test
	ctx := context.Background()
	var mu sync.Mutex
	var closed []string
	var rotated atomic.Bool
	target := func(login string) power.Target {
		return power.Target{BMC: "https://chassis", Config: login, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			if login == "v3" && rotated.Load() {
				return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Message: "invalid credentials", Err: power.ErrAuth}
			}
			return &closeLog{Controller: alwaysOn{}, name: login, mu: &mu, closed: &closed}, nil
		}}
	}
	b := pool.Controller("b", target("v3"))
	_, err := b.State(ctx) // B's credentials logged in here once (proven)
	require.NoError(t, err)
	clk.Advance(time.Second)
	a := pool.Controller("a", target("v1"))
	_, err = a.State(ctx)
	require.NoError(t, err)
	clk.Advance(time.Second)
	d := pool.Controller("d", target("v2"))
	_, err = d.State(ctx) // unproven: over the bound, its success trims B's session
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	require.Equal(t, []string{"v3"}, closed)
	closed = nil
	mu.Unlock()

	rotated.Store(true) // B's password changed on the BMC; its Secret is stale
	for round := range 4 {
		clk.Advance(31 * time.Minute) // past B's back-off (at most 30 min) and LoginInterval
		// A and D read on (their sessions open, or logged in again).
		_, err = a.State(ctx)
		require.NoError(t, err)
		clk.Advance(time.Second)
		_, err = d.State(ctx)
		require.NoError(t, err)
		clk.Advance(time.Second)
		_, err = b.State(ctx)
		require.ErrorIs(t, err, power.ErrAuth, "round %d", round)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("working sessions logged out for B's refused logins: %v", closed)
	// The first refusal after the rotation is not known beforehand; every
	// later one is (the BMC refused these credentials, ErrAuth).
	assert.LessOrEqual(t, len(closed), 1,
		"a wrong password closed other hosts' working sessions, once per back-off period: %v", closed)
}
