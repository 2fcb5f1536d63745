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

// TestReview35_CommandLoopThrashesLogins (review round 19, issue 35
// point 2, the engineer's own choice attacked: a power command's login is
// not held to LoginInterval). Four hosts behind one Redfish service, own
// logins, the default bound of 2 sessions (the layout): A and B
// are read every 5 s (monitoring), C and D are power-cycled (Off, then
// On) every 5 s each, their commands one after the other (a remediation
// or a burn-in loop; a controller retrying a fence). Each command finds
// its host's session closed by the other's command, logs in, and closes
// the least recently used idle session at once, whatever LoginInterval:
// the BMC sees a login per command, for as long as the loop runs, and
// each command eviction also spends the endpoint's eviction budget, so A
// and B (working, credentials right) are refused meanwhile. The issue
// asks for at most one login per endpoint per minute in steady state.
// Ground truth: the emulator's login log.
func TestReview35_CommandLoopThrashesLogins(t *testing.T) {
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
	bb := pool.Controller("b", loginTarget(srv, "2", "secret-b/v1"))
	c := pool.Controller("c", loginTarget(srv, "3", "secret-c/v1"))
	d := pool.Controller("d", loginTarget(srv, "4", "secret-d/v1"))
	steady := fake.Epoch.Add(5 * time.Minute)
	refused, cmdFailed := 0, 0
	for step := 0; step < 12*10; step++ {
		now := clk.Now()
		for _, r := range []power.Controller{a, bb} {
			if _, err := r.State(ctx); err != nil && !now.Before(steady) {
				refused++
			}
		}
		for _, w := range []power.Controller{c, d} {
			var err error
			if step%2 == 0 {
				err = w.Off(ctx, power.ModeHard)
			} else {
				err = w.On(ctx)
			}
			if err != nil {
				cmdFailed++
			}
		}
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	var at []time.Time
	for _, l := range b.LoginLog() {
		if !l.At.Before(steady) {
			at = append(at, l.At)
		}
	}
	t.Logf("steady state (5 min): %d logins, at most %d in a minute; reads of A and B refused: %d of 120; commands failed: %d", len(at), maxPerMinute(at), refused, cmdFailed)
	assert.LessOrEqual(t, maxPerMinute(at), 2, "the BMC sees a login per power command, closing working sessions at the command rate")
}
