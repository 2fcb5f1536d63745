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

// TestReview35_BasicAuthMissingEvictsSessions (review round 17, issue 35
// points 1 and 2): working hosts A and C (session logins of their own)
// fill the bound (2), read every 5 s; four BasicAuth hosts, whose systems
// are missing, are read every 5 s (first reads 35 s apart). A BasicAuth
// "login" opens no session on the BMC, and its session is never kept; yet
// each of its retries may close a working session, whose host then logs in
// again: one login a minute for ever, where none is needed. Ground truth: the emulator's session logins on the test's clock.
func TestReview35_BasicAuthMissingEvictsSessions(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	working := []power.Controller{
		pool.Controller("a", loginTarget(srv, "1", "secret-a/v1")),
		pool.Controller("c", loginTarget(srv, "2", "secret-c/v1")),
	}
	var missing []power.Controller
	for i := 0; i < 4; i++ {
		missing = append(missing, pool.Controller(fmt.Sprintf("m%d", i), basicTarget(srv, fmt.Sprint(10+i), bmcPassword)))
	}
	refused := 0
	for step := 0; step < 30*12; step++ {
		for _, w := range working {
			if _, err := w.State(ctx); err != nil {
				refused++
			}
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
	t.Logf("session logins in the last 20 min: %d (all %d); working calls refused %d", n, len(b.LoginLog()), refused)
	// A and C fit the bound and are never idle: no login is needed in
	// steady state but one per IdleTimeout at most. Each of these logins
	// is a working host's session closed for a BasicAuth host, which
	// opens no session on the BMC, whose system is missing.
	assert.LessOrEqual(t, n, 4, "working sessions closed (and logged in again) every minute for BasicAuth hosts that take no session")
	assert.Zero(t, refused)
}
