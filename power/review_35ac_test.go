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

// TestReview35_JoinWaitOutlastsCallDeadline (review round 18, round 17's
// fix of TestReview35_JoinedKeptSessionRefusesEvictedHost, admissions (b)
// and (c)): a login now waits while a host joins the kept session rather
// than close a working one. But the join is bounded by ConnectTimeout
// (default 30 s), not by anything the waiting caller can afford: a join
// that hangs (B2's dead blade, its reads never answered) holds working
// host A's fence for the whole ConnectTimeout. A fence whose caller can
// wait a third of it (1 s of 3 s here; 10 s of the default 30 s) is
// refused as busy, its session having been closed a moment before for
// B1's futile login (a host whose system is missing, on its first
// retry). The round-17 test passes only because its fence may wait ten
// times the join's bound. Ground truth: A's hardware and the emulator's
// reset log.
func TestReview35_JoinWaitOutlastsCallDeadline(t *testing.T) {
	clk := newClock()
	hwA := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(clk.Now, hwA, "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	b.AddSystem("3", fake.NewPower(time.Now, fake.PowerConfig{}))
	var hang atomic.Bool // system 3's blade dies once B1's logins are done
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/3") {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		b.ServeHTTP(w, r)
	}))
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
	_, err = b1.State(ctx)
	require.ErrorIs(t, err, power.ErrAfterLogin)
	clk.Advance(3 * time.Second)
	_, err = b1.State(ctx) // evicts A's idle session; its session is kept
	require.ErrorIs(t, err, power.ErrAfterLogin)

	hang.Store(true)
	joined := make(chan error, 1)
	go func() { _, err := b2.State(ctx); joined <- err }() // joins the kept session; its read hangs
	time.Sleep(300 * time.Millisecond)
	clk.Advance(time.Second)

	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, time.Second) // a fence that can wait 1 s (a third of ConnectTimeout)
	defer cancel()
	err = a.Off(fctx, power.ModeHard)
	t.Logf("A's fence after %v: %v", time.Since(start).Round(time.Millisecond), err)
	assert.NoError(t, err, "host A's fence waited its whole deadline for B2's hanging join and was refused")
	assert.Equal(t, []string{"ForceOff"}, b.Resets(), "A's fence never reached the BMC")
	s, _ := hwA.State(ctx)
	assert.Equal(t, power.StateOff, s, "host A (system 1) is still powered")
	t.Logf("B2's join: %v", <-joined)
}
