package power_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_RepairedBladeLockedOut (review round 18, admission (a),
// issue 35 point 1, liveness with working neighbours kept busy): working
// hosts A (system 1) and C (system 2), own logins, fill the bound (2) and
// are read every 5 s. Blade R (system 3, its own login) is not on the
// chassis: its first two tries fail after the BMC accepted the login, so
// its login "serves nothing". Two minutes in, the blade is repaired
// (system 3 served again). R is read every 5 s too. Its login now fails
// as busy at once, never tried, for as long as A and C are read (their
// sessions never go idle for IdleTimeout): a repaired host is refused for
// ever because of its neighbours, although its credentials work and its
// system is back. Ground truth: the emulator's login log (no login of
// R's after the repair) and R's hardware (its fence never lands).
func TestReview35_RepairedBladeLockedOut(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	srv := b.StartTLS()
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))
	r := pool.Controller("r", loginTarget(srv, "3", "secret-r/v1"))

	hwR := fake.NewPower(time.Now, fake.PowerConfig{})
	repairedAt := fake.Epoch.Add(2 * time.Minute)
	var firstOK time.Time
	refusedWorking := 0
	var lastErr error
	for step := 0; step < 30*12; step++ {
		now := clk.Now()
		if now.Equal(repairedAt) {
			b.AddSystem("3", hwR) // the blade is back
		}
		for _, w := range []power.Controller{a, c} {
			// After the repair three working logins share two slots:
			// one of them may be refused for a while (LoginInterval).
			if _, err := w.State(ctx); err != nil && now.Before(repairedAt) {
				refusedWorking++
			}
		}
		if _, err := r.State(ctx); err == nil {
			if firstOK.IsZero() {
				firstOK = now
			}
		} else if !now.Before(repairedAt) {
			lastErr = err
		}
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	loginsAfter := 0
	for _, l := range b.LoginLog() {
		if l.At.After(repairedAt) {
			loginsAfter++
		}
	}
	t.Logf("R first answered at %v after the repair; logins since the repair %d; R's last error: %v", firstOK.Sub(repairedAt), loginsAfter, lastErr)
	require.Zero(t, refusedWorking)
	// The repaired blade must be served within a bounded time: its own
	// back-off (at most MaxBackoff, 2 min) plus one LoginInterval (1 min).
	require.False(t, firstOK.IsZero(), "blade R, repaired 2 min in, was refused for the next 28 min while A and C are read every 5 s: its login serves nothing and never closes a session (last error: %v)", lastErr)
	assert.LessOrEqual(t, firstOK.Sub(repairedAt), 3*time.Minute+5*time.Second)
	require.NoError(t, r.Off(ctx, power.ModeHard))
	s, _ := hwR.State(ctx)
	assert.Equal(t, power.StateOff, s)
}

// TestReview35_BladeBlipLocksOutForEver (review round 18, admission (a),
// issue 35 point 1): the same lock-out from a transient fault. Blade R's
// system answers 503 to its first two logins' reads, two seconds apart (a
// blade controller restarting), and is fine from then on. Working hosts A
// and C fill the bound (2) and are read every 5 s. R, read every 5 s too,
// is refused as busy for the next ten minutes without a single login: two
// failed tries in a row turn a login into one that "serves nothing", and
// nothing but an idle sweep (never, with A and C busy) or a Forget clears
// that. Ground truth: the emulator's login log and R's hardware.
func TestReview35_BladeBlipLocksOutForEver(t *testing.T) {
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	hwR := fake.NewPower(time.Now, fake.PowerConfig{})
	b.AddSystem("3", hwR)
	var blip atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if blip.Load() && req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/redfish/v1/Systems/3") {
			http.Error(w, "blade controller restarting", http.StatusServiceUnavailable)
			return
		}
		b.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()
	a := pool.Controller("a", loginTarget(srv, "1", "secret-a/v1"))
	c := pool.Controller("c", loginTarget(srv, "2", "secret-c/v1"))
	r := pool.Controller("r", loginTarget(srv, "3", "secret-r/v1"))
	for _, w := range []power.Controller{a, c} {
		_, err := w.State(ctx)
		require.NoError(t, err)
	}
	clk.Advance(5 * time.Second)
	blip.Store(true) // the blip: reads of system 3 answered 503
	for i := 0; i < 2; i++ {
		_, err := r.State(ctx)
		t.Logf("R's try %d during the blip: %v", i+1, err)
		clk.Advance(2 * time.Second)
	}
	blip.Store(false)
	healedAt := clk.Now()
	logins := len(b.LoginLog())
	var firstOK time.Time
	var lastErr error
	for step := 0; step < 10*12; step++ {
		for _, w := range []power.Controller{a, c} {
			_, _ = w.State(ctx) // three working logins, two slots: one may wait its turn
		}
		if _, err := r.State(ctx); err == nil && firstOK.IsZero() {
			firstOK = clk.Now()
		} else if err != nil {
			lastErr = err
		}
		clk.Advance(5 * time.Second)
		power.Sweep(pool)
	}
	t.Logf("logins after the blip: %d; R's last error: %v", len(b.LoginLog())-logins, lastErr)
	require.False(t, firstOK.IsZero(), "blade R, whose system answered 503 twice, was refused for the next 10 min (never tried) while A and C are read every 5 s: %v", lastErr)
	assert.LessOrEqual(t, firstOK.Sub(healedAt), 3*time.Minute+5*time.Second)
	require.NoError(t, r.Off(ctx, power.ModeHard))
	s, _ := hwR.State(ctx)
	assert.Equal(t, power.StateOff, s)
}
