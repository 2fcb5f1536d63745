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
)

// TestReview35_TwoWorkingTwoMissingLogins (review round 17, issue 35
// points 1 and 2): the bound (2) is held by working hosts A and C (their
// own logins, read every 5 s); logins b and d serve two hosts each whose
// systems are missing. Ground truth: the emulator's login log (on the
// test's clock); every call of A and C must answer.
func TestReview35_TwoWorkingTwoMissingLogins(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
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
	for i := 0; i < 2; i++ {
		missing = append(missing,
			pool.Controller(fmt.Sprintf("b%d", i), loginTarget(srv, fmt.Sprint(10+i), "secret-b/v1")),
			pool.Controller(fmt.Sprintf("d%d", i), loginTarget(srv, fmt.Sprint(50+i), "secret-d/v1")))
	}
	refused := 0
	for step := 0; step < 30*12; step++ {
		for i, w := range working {
			if _, err := w.State(ctx); err != nil {
				refused++
				if refused < 5 {
					t.Logf("t=%v: working host %d refused: %v", time.Duration(step)*5*time.Second, i, err)
				}
			}
		}
		for _, m := range missing {
			_, _ = m.State(ctx)
		}
		clk.Advance(5 * time.Second)
	}
	from := fake.Epoch.Add(10 * time.Minute)
	perMinute := map[int]int{}
	var steady []time.Time
	for _, l := range b.LoginLog() {
		if !l.At.Before(from) {
			steady = append(steady, l.At)
			perMinute[int(l.At.Sub(fake.Epoch)/time.Minute)]++
		}
	}
	t.Logf("logins in all: %d, in the last 20 min: %d; per minute: %v; refused: %d", len(b.LoginLog()), len(steady), perMinute, refused)
	assert.LessOrEqual(t, len(steady), 20, "more than one login a minute in steady state (issue 35 point 2)")
	assert.Zero(t, refused, "a working host was refused because of its neighbours' missing systems")
}
