package power_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_TwoMissingLoginsSteadyLoginRate (review round 17, issue 35
// point 2): one Redfish service (a chassis), MaxSessions 2 (the default).
// Host A (system 1, its own login) works and is read every 5 s. Two other
// logins, b and d, each serve two hosts whose systems the chassis does not
// list (blades renumbered): B1, B2 (login b) and D1, D2 (login d), also
// read every 5 s. Round 16 keeps a login's session when its system is
// missing so that such hosts "share one login per IdleTimeout". Here the
// two logins' kept sessions close each other (A's session holds the other
// slot), so every host logs in at its own back-off, and the endpoint sees
// far more than the issue's "at most one login per endpoint per minute in
// steady state". Ground truth: the emulator's login log (on the test's
// clock), A's reads and its hardware.
func TestReview35_TwoMissingLoginsSteadyLoginRate(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d hosts per login", n), func(t *testing.T) { twoMissingLogins(t, n) })
	}
}

func twoMissingLogins(t *testing.T, perLogin int) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	var missing []power.Controller
	for i := 0; i < perLogin; i++ {
		missing = append(missing,
			pool.Controller(fmt.Sprintf("b%d", i), loginTarget(srv, fmt.Sprint(10+i), "secret-b/v1")),
			pool.Controller(fmt.Sprintf("d%d", i), loginTarget(srv, fmt.Sprint(50+i), "secret-d/v1")))
	}
	const minutes = 30
	refusedA := 0
	for step := 0; step < minutes*12; step++ {
		if _, err := a.State(ctx); err != nil {
			refusedA++
			t.Logf("t=%v: host A refused: %v", time.Duration(step)*5*time.Second, err)
		}
		for _, m := range missing {
			_, _ = m.State(ctx)
		}
		clk.Advance(5 * time.Second)
	}
	log := b.LoginLog()
	for i, l := range log {
		require.True(t, l.OK, "login %d was refused: every login's credentials are right", i)
	}
	// Steady state: the last 20 minutes.
	from := fake.Epoch.Add(10 * time.Minute)
	var steady []time.Time
	perMinute := map[int]int{}
	for _, l := range log {
		if !l.At.Before(from) {
			steady = append(steady, l.At)
			perMinute[int(l.At.Sub(fake.Epoch)/time.Minute)]++
		}
	}
	t.Logf("logins in all: %d; in the last 20 min: %d; per minute: %v", len(log), len(steady), fmt.Sprint(perMinute))
	assert.LessOrEqual(t, len(steady), 20, "the endpoint saw more than one login a minute in steady state (issue 35 point 2)")
	assert.LessOrEqual(t, maxPerMinute(steady), 1, "more than one login in a minute in steady state")
	assert.Zero(t, refusedA, "host A, whose session works, was refused")
}

// TestReview35_MissingLoginEvictsWorkingSteadyRate (review round 17,
// issue 35 points 1 and 2): the BMC's bound (2) is held by hosts A
// (system 1) and C (system 2), each its own login, both working and read
// every 5 s. Login b serves hosts whose systems are missing. Each of b's
// retries (at its host's back-off) evicts a working host's session to
// log in, and its session is kept only until the evicted host closes it
// to log in again: in steady state the endpoint sees b's logins plus the
// working hosts' re-logins, more than one a minute, for as long as b's
// systems stay missing (the fault kept on). Ground truth: the emulator's
// login log on the test's clock. The missing hosts are first read 35 s
// apart (as hosts added to an inventory one by one are): their back-offs
// are out of phase, and each minute one of them evicts a working session
// (LoginInterval) and the evicted host logs in again: two logins a minute
// for ever, and a working host's session closed every minute, with a
// single login whose systems are missing (the layout round 16 says now
// sees "one login per IdleTimeout").
func TestReview35_MissingLoginEvictsWorkingSteadyRate(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	working := []power.Controller{
		pool.Controller("a", loginTarget(srv, "1", "secret-a/v1")),
		pool.Controller("c", loginTarget(srv, "2", "secret-c/v1")),
	}
	var missing []power.Controller
	for i := 0; i < 4; i++ {
		missing = append(missing, pool.Controller(fmt.Sprintf("b%d", i), loginTarget(srv, fmt.Sprint(10+i), "secret-b/v1")))
	}
	refused := 0
	for step := 0; step < 30*12; step++ {
		for i, w := range working {
			if _, err := w.State(ctx); err != nil {
				refused++
				t.Logf("t=%v: working host %d refused: %v", time.Duration(step)*5*time.Second, i, err)
			}
		}
		for i, m := range missing {
			if step >= i*7 { // staggered: host i is first read at 35 s × i
				_, _ = m.State(ctx)
			}
		}
		clk.Advance(5 * time.Second)
	}
	from := fake.Epoch.Add(10 * time.Minute)
	perMinute := map[int]int{}
	n := 0
	for i, l := range b.LoginLog() {
		require.True(t, l.OK, "login %d was refused", i)
		if !l.At.Before(from) {
			n++
			perMinute[int(l.At.Sub(fake.Epoch)/time.Minute)]++
		}
	}
	t.Logf("logins in the last 20 min: %d; per minute: %v", n, perMinute)
	assert.LessOrEqual(t, n, 20, "the endpoint saw more than one login a minute in steady state (issue 35 point 2)")
	var steady []time.Time
	for _, l := range b.LoginLog() {
		if !l.At.Before(from) {
			steady = append(steady, l.At)
		}
	}
	assert.LessOrEqual(t, maxPerMinute(steady), 1, "two logins a minute for as long as b's systems are missing: b's login evicts a working session and the evicted host logs in again")
	assert.Zero(t, refused, "a working host was refused")
}
