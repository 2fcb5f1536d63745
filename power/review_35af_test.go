package power_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
)

// TestReview35_MissingHostWithQuietNeighbourEvictsForEver (review round
// 18, admission (b), issue 35 point 2 with the fault kept on): a login
// "serves nothing" only if every one of its hosts failed twice. Login b
// serves blade B1 (system missing, read every 5 s) and host B2 (system
// works, read once at the start: a server touched only when it is
// rebooted); login d likewise D1 and D2. Working hosts A and C (own
// logins) fill the bound (2) and are read every 5 s. B2 and D2 never
// fail, so B1's and D1's retries (every MaxBackoff, 2 min) each close a
// working session for a login that can serve nothing, and the working
// host logs in again: logins never stop, two a minute in steady state.
// Ground truth: the emulator's login log.
func TestReview35_MissingHostWithQuietNeighbourEvictsForEver(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for _, id := range []string{"2", "3", "4"} {
		b.AddSystem(id, fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))
	b1 := pool.Controller("b1", loginTarget(srv, "8", "secret-b/v1"))
	b2 := pool.Controller("b2", loginTarget(srv, "3", "secret-b/v1"))
	d1 := pool.Controller("d1", loginTarget(srv, "9", "secret-d/v1"))
	d2 := pool.Controller("d2", loginTarget(srv, "4", "secret-d/v1"))
	_, _ = b2.State(ctx)
	clk.Advance(time.Minute)
	_, _ = d2.State(ctx)
	clk.Advance(time.Minute)
	refused := 0
	for step := 0; step < 40*12; step++ {
		for _, w := range []power.Controller{a, c} {
			if _, err := w.State(ctx); err != nil {
				refused++
			}
		}
		_, _ = b1.State(ctx)
		if step >= 6 {
			_, _ = d1.State(ctx)
		}
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	from := clk.Now().Add(-20 * time.Minute)
	n := 0
	for _, l := range b.LoginLog() {
		if !l.At.Before(from) {
			n++
		}
	}
	t.Logf("session logins in the last 20 min: %d (all %d); working calls refused: %d", n, len(b.LoginLog()), refused)
	// A and C fit the bound and are never idle; B1 and D1 can serve
	// nothing (their systems are missing). No login is needed, but one
	// per IdleTimeout for a kept session, and the limit is one a
	// minute.
	assert.LessOrEqual(t, n, 20, "more than one login a minute in steady state, each closing a working session for a login that serves nothing")
	assert.Zero(t, refused)
}
