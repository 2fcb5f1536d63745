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

// TestReview35_OneMissingLoginFullBound (review round 17, issue 35 point
// 2): one working host A (read every 5 s) and eight hosts of one other
// login whose systems are missing (first read 35 s apart), on a BMC
// whose bound is the Pool's MaxSessions. With room for the kept session
// (2) the endpoint sees one login per IdleTimeout, as round 16 says; with
// the bound full (1: A's session fills it) the missing hosts' login
// evicts A's session each LoginInterval and A logs in again: two logins
// a minute for as long as the systems are missing. Ground truth: the
// emulator's login log on the test's clock.
func TestReview35_OneMissingLoginFullBound(t *testing.T) {
	for _, ms := range []int{2, 1} {
		t.Run(fmt.Sprintf("MaxSessions %d", ms), func(t *testing.T) {
			clk := newClock()
			b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
			srv := b.StartTLS()
			t.Cleanup(srv.Close)
			pool := newPool(t, clk, power.PoolConfig{MaxSessions: ms})
			ctx := context.Background()
			a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
			var missing []power.Controller
			for i := 0; i < 8; i++ {
				missing = append(missing, pool.Controller(fmt.Sprintf("b%d", i), loginTarget(srv, fmt.Sprint(10+i), "secret-b/v1")))
			}
			refused := 0
			for step := 0; step < 30*12; step++ {
				if _, err := a.State(ctx); err != nil {
					refused++
				}
				for i, m := range missing {
					if step >= i*7 {
						_, _ = m.State(ctx)
					}
				}
				clk.Advance(5 * time.Second)
				power.Sweep(pool)
			}
			from := fake.Epoch.Add(10 * time.Minute)
			n := 0
			for _, l := range b.LoginLog() {
				if !l.At.Before(from) {
					n++
				}
			}
			t.Logf("steady logins %d (20 min), refused %d", n, refused)
			assert.LessOrEqual(t, n, 20, "more than one login a minute in steady state (issue 35 point 2)")
			assert.Zero(t, refused, "host A, whose credentials work, was refused")
		})
	}
}
