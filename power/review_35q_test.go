package power_test

import (
	"context"
	"errors"
	"fmt"
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

// anonymousCollection serves b, with the Systems collection answered to
// anyone (a BMC that serves its collections without authentication but
// checks every member): the request is passed to b with the right
// credentials in place of whatever it carried.
func anonymousCollection(b *redfishtest.BMC) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems" {
			r = r.Clone(r.Context())
			r.Header.Del("X-Auth-Token")
			r.SetBasicAuth("admin", bmcPassword)
		}
		b.ServeHTTP(w, r)
	})
}

// TestReview35_ExpiredSharedSessionLooksMemberOnly (review round 15): the
// shared session of systems 1 and 2 expires on the BMC (the BMC was reset,
// or timed the session out) while host A is idle. Host B, whose
// credentials are right, joins it: its system's read is refused (401), and
// so is every member of the Systems listing, whose collection the BMC
// serves without authentication. That is an expired session, not system
// 2's own refusal: the join must log in again (once, for all) and B's
// State must be answered. The code takes the member-only 401s for B's own
// failure (membersFailed -> systemsOwn -> ErrAfterLogin), so share()
// never re-logs in, and B is refused at every retry for as long as A makes
// no call (up to the Pool's IdleTimeout, here an hour: 5 retries over 25
// min all refused). Ground truth: the emulator's session table (no
// session) and login count.
func TestReview35_ExpiredSharedSessionLooksMemberOnly(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := httptest.NewTLSServer(anonymousCollection(b))
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{IdleTimeout: time.Hour})
	ctx := context.Background()
	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	bc := pool.Controller("b", systemTarget(srv, "2", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Sessions())

	// The BMC drops its sessions (a BMC reset): delete A's session.
	for _, id := range []string{"1"} {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/redfish/v1/SessionService/Sessions/"+id, nil)
		req.SetBasicAuth("admin", bmcPassword)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Equal(t, 0, b.Sessions(), "the BMC holds no session any more")

	var ok int
	var last error
	for range 5 {
		_, err := bc.State(ctx)
		if err == nil {
			ok++
		} else {
			last = err
			t.Logf("B: %v (afterLogin=%v)", err, errors_Is(err, power.ErrAfterLogin))
		}
		clk.Advance(5 * time.Minute) // past B's own back-off; A stays idle
	}
	assert.Equal(t, 5, ok, "B's credentials are right and the BMC is healthy: its State is answered (last error: %v)", last)
	assert.LessOrEqual(t, b.Logins(), 2, "one re-login for the expired session")
}

func errors_Is(err, target error) bool { return errors.Is(err, target) }

// TestReview35_BusySystemsStormLogins (review round 15): a chassis service
// for 8 systems keeps answering 503 to every system's resource (its
// management path is busy: a firmware update, a hung blade manager) while
// the Systems collection, served from its cache, answers. The 8 hosts have
// the same, right credentials and are polled every 5 s. Every host's
// Connect logs in, fails on its own system (ErrAfterLogin: the login is
// counted a success, so it never backs off), logs the session out and
// retries at its own pace: the BMC gets a login per host per retry, with
// the fault kept on. Issue 35 point 2 bounds logins per endpoint, not per
// host: after the first minutes (steady state) the busy BMC must see at
// most a couple of logins a minute, not one per host. Ground truth: the
// emulator's own login log.
func TestReview35_BusySystemsStormLogins(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	const n = 8
	for i := 2; i <= n; i++ {
		b.AddSystem(fmt.Sprint(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.ServiceTemporarilyUnavailable","message":"busy"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	var ctrls []power.Controller
	for i := 1; i <= n; i++ {
		ctrls = append(ctrls, pool.Controller(fmt.Sprint("h", i), systemTarget(srv, fmt.Sprint(i), bmcPassword)))
	}
	start := clk.Now()
	for clk.Now().Sub(start) < 15*time.Minute {
		for _, c := range ctrls {
			_, err := c.State(ctx)
			require.Error(t, err, "every system is busy")
		}
		clk.Advance(5 * time.Second)
	}
	var steady []time.Time
	for _, l := range b.LoginLog() {
		if l.At.Sub(start) >= 5*time.Minute {
			steady = append(steady, l.At)
		}
	}
	t.Logf("logins: %d in all, %d in the last 10 min, at most %d in a minute of those (first minute: %d)",
		b.Logins(), len(steady), maxPerMinute(steady), maxPerMinute(loginTimes(b)))
	assert.LessOrEqual(t, maxPerMinute(steady), 2, "logins per minute to one busy BMC in steady state")
}

func loginTimes(b *redfishtest.BMC) []time.Time {
	var at []time.Time
	for _, l := range b.LoginLog() {
		at = append(at, l.At)
	}
	return at
}
