package power_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_BasicAuthRotatedPasswordHeldCallsStorm (review round 24,
// issue 35 point 1; round 23's ErrUnanswered, errors.go: "a BMC with a
// wrong password it does not answer sees at most two tries a minute").
// A chassis of 8 blades, one account with basic auth; the monitor polls
// every blade every 5 s. The blades connect with the right password;
// then the password is rotated at the BMC and the Secret is not yet
// updated. The BMC holds the requests with the old password unanswered
// (an anti-brute-force delay, as in TestReview35w_BasicAuthWrongPasswordSlowBMCLoginStorm).
// Each call of an already connected host sends the wrong password
// (basic auth sends it with every request) and times out: a timed-out
// call never backs the login off or retires the session (pool_call.go
// release: only ErrAuth does), so the connected hosts go on sending the
// wrong password every 5 s each, for ever (20 to 100 a minute here), long after the
// LoginInterval in which the credentials were last answered. The same
// rotation answered 401 at once is logged for comparison (the session is
// retired and the login backs off). Ground truth: requests with the old
// password that reached the BMC, per minute, from the second minute after
// the rotation on.
func TestReview35_BasicAuthRotatedPasswordHeldCallsStorm(t *testing.T) {
	run := func(hang bool) (perMinute, total int) {
		b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
		const n = 8
		for i := 2; i <= n; i++ {
			b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
		}
		clk := newClock()
		old := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+bmcPassword))
		var rotated atomic.Bool
		var from time.Time
		var mu sync.Mutex
		var wrong []time.Time
		paths := map[string]int{}
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rotated.Load() && r.Header.Get("Authorization") == old {
				mu.Lock()
				if now := clk.Now(); !now.Before(from) {
					wrong = append(wrong, now)
					paths[r.URL.Path]++
				}
				mu.Unlock()
				if hang {
					<-r.Context().Done()
					return
				}
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			b.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: time.Second, CallTimeout: 250 * time.Millisecond})
		ctx := context.Background()
		var cs []power.Controller
		for i := 1; i <= n; i++ {
			cfg := redfish.Config{Endpoint: srv.URL, SystemID: strconv.Itoa(i), Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
			tg := power.Target{BMC: srv.URL, Config: strconv.Itoa(i) + "/basic", Login: "admin/pw",
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
			cs = append(cs, pool.Controller("h"+strconv.Itoa(i), tg))
		}
		errs := make([]error, n)
		poll := func() {
			var wg sync.WaitGroup
			for i, c := range cs {
				wg.Add(1)
				go func() { defer wg.Done(); _, errs[i] = c.State(ctx) }()
			}
			wg.Wait()
			clk.Advance(5 * time.Second)
		}
		for range 5 { // all connected, the right password
			poll()
			if errors.Join(errs...) == nil {
				break
			}
		}
		if !assert.NoError(t, errors.Join(errs...), "the blades connect with the right password") {
			return 0, 0
		}
		mu.Lock()
		from = clk.Now().Add(time.Minute) // past the LoginInterval after the last answer
		mu.Unlock()
		rotated.Store(true)
		for range 36 { // 3 minutes
			poll()
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("requests with the old password by path: %v", paths)
		return maxPerMinute(wrong), len(wrong)
	}
	pm401, tot401 := run(false)
	t.Logf("old password answered 401: %d requests with it in minutes 2-3 after the rotation, at most %d in a minute", tot401, pm401)
	pm, tot := run(true)
	t.Logf("old password held unanswered: %d requests with it in minutes 2-3 after the rotation, at most %d in a minute", tot, pm)
	assert.LessOrEqual(t, pm, 4, "requests with the wrong password in one minute, a minute and more after the rotation (connected hosts' calls: a storm)")
	assert.LessOrEqual(t, tot, 2*tot401+4, "requests with the wrong password, against the same BMC answering 401")
}

// TestHeldReadsSpareHealthyNeighbour (issue 35, the rule that bounds
// TestReview35_BasicAuthRotatedPasswordHeldCallsStorm): basic auth,
// blades 1 and 2 on one account, both connected. Blade 2 dies and the
// monitor polls it alone for two minutes (every call times out, nothing
// with the credentials is answered): its reads are held, one a pause
// apart, and those not sent fail with ErrNotSent and ErrBackoff, never
// reaching the BMC (ground truth: the BMC's count of blade 2's reads).
// Healthy blade 1, whose own last call was answered, is read right after
// one of blade 2's reads was sent: its read is sent and answered (a dead
// neighbour's timeouts hold no healthy host's read), and that answer
// ends the hold for blade 2 too.
func TestHeldReadsSpareHealthyNeighbour(t *testing.T) {
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	b.AddSystem("2", fake.NewPower(time.Now, fake.PowerConfig{}))
	var dead atomic.Bool
	var reads2 atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2") && dead.Load() {
			reads2.Add(1)
			<-r.Context().Done()
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 2 * time.Second, CallTimeout: 250 * time.Millisecond})
	target := func(id string) power.Target {
		cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, BasicAuth: true, RootCAs: roots}
		return power.Target{BMC: srv.URL, Config: id + "/basic", Login: "admin/pw",
			Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
	}
	c1, c2 := pool.Controller("h1", target("1")), pool.Controller("h2", target("2"))
	ctx := context.Background()
	for _, c := range []power.Controller{c1, c2} {
		_, err := c.State(ctx)
		require.NoError(t, err, "the blades answer")
	}
	dead.Store(true)
	var held, sent int
	for range 24 { // two minutes, blade 2 alone
		clk.Advance(5 * time.Second)
		before := reads2.Load()
		_, err := c2.State(ctx)
		require.Error(t, err, "dead blade 2's read")
		if reads2.Load() == before {
			held++
			assert.ErrorIs(t, err, power.ErrNotSent, "a held read")
			assert.ErrorIs(t, err, power.ErrBackoff, "a held read")
		} else {
			sent++
		}
	}
	t.Logf("dead blade 2's reads in two minutes: %d sent, %d held", sent, held)
	assert.Positive(t, held, "no read of blade 2 held after a minute with no answer")
	assert.LessOrEqual(t, sent, 12+3, "blade 2's reads sent (12 in the first minute, then one a pause apart)")

	// Blade 2's reads are held now (its last read was sent within the
	// pause, or is): blade 1's read goes.
	before := reads2.Load()
	_, err := c2.State(ctx)
	require.Error(t, err)
	require.Equal(t, before, reads2.Load(), "blade 2's read is held at this point")
	st, err := c1.State(ctx)
	require.NoError(t, err, "healthy blade 1's read, beside a dead neighbour whose reads are held")
	assert.Equal(t, power.StateOn, st)
	before = reads2.Load()
	_, err = c2.State(ctx)
	assert.NotErrorIs(t, err, power.ErrNotSent, "blade 1's answer ends the hold: blade 2's read is sent")
	assert.Equal(t, before+1, reads2.Load(), "blade 2's read reached the BMC")
}
