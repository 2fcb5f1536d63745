package power_test

import (
	"context"
	"crypto/x509"
	"fmt"
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

// chassis35ao2 is one Redfish service for systems "1".."n". Once rotated
// is set, the BMC's password was changed: every request sending the old
// one with basic auth is refused 401, and the refusal's instant (the
// test's clock) is logged: ground truth, what the BMC's lock-out
// counter sees.
type chassis35ao2 struct {
	srv     *httptest.Server
	roots   *x509.CertPool
	clk     *manualClock
	rotated atomic.Bool
	deny1   atomic.Bool // system 1's resources answer 401 (a per-blade refusal)
	mu      sync.Mutex
	refused []time.Time
}

func newChassis35ao2(t *testing.T, clk *manualClock, n int) *chassis35ao2 {
	t.Helper()
	c := &chassis35ao2{clk: clk}
	b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	c.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, basic := r.BasicAuth(); basic && c.rotated.Load() {
			c.mu.Lock()
			c.refused = append(c.refused, c.clk.Now())
			c.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.GeneralError","message":"invalid credentials"}}`))
			return
		}
		if c.deny1.Load() && (r.URL.Path == "/redfish/v1/Systems/1" || strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/1/")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InsufficientPrivilege","message":"not allowed"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	c.roots = x509.NewCertPool()
	c.roots.AddCert(c.srv.Certificate())
	return c
}

func (c *chassis35ao2) target(id, password string) power.Target {
	return power.Target{BMC: c.srv.URL, Config: "admin/" + password, Connect: func(ctx context.Context) (power.Controller, error) {
		return redfish.Connect(ctx, redfish.Config{Endpoint: c.srv.URL, SystemID: id, Username: "admin", Password: password, RootCAs: c.roots, BasicAuth: true})
	}}
}

func (c *chassis35ao2) refusals() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.refused...)
}

// rotation35ao2 connects n hosts of one chassis with basic auth, polls
// each every 5 s (staggered), rotates the BMC's password and goes on
// polling for three minutes; it returns the most refused requests the
// BMC saw in any minute.
func rotation35ao2(t *testing.T, n int) (int, int) {
	clk := newClock()
	ch := newChassis35ao2(t, clk, n)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1), bmcPassword))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / time.Duration(n)
	for round := 0; round < 2; round++ {
		for i := range hosts {
			clk.Advance(step)
			_, err := hosts[i].State(ctx)
			require.NoError(t, err)
		}
	}
	ch.rotated.Store(true)
	for round := 0; round < 36; round++ { // 3 minutes
		for i := range hosts {
			clk.Advance(step)
			_, _ = hosts[i].State(ctx)
		}
	}
	r := ch.refusals()
	return maxPerMinute(r), len(r)
}

// TestReview35ao2_BasicAuthRotationRefusedPerMinuteGrowsWithHosts
// (review 35ao2; package doc: "after an authentication failure
// AuthBackoff (30 s) doubling up to MaxAuthBackoff (30 min), so a BMC
// with a wrong password sees at most two logins a minute with it";
// issue 35 item 1: back off logins per endpoint and credentials). With
// basic auth every call sends the credentials ("the call was a login,
// in effect"). Round 40's release judges a call's 401 "this host's own"
// when another host's call with the credentials was answered within
// LoginInterval, and backs off that host alone while keeping the
// session: after a real rotation on a chassis every host but the one
// answered last is judged alone, each sends the refused password on its
// own back-off schedule, and the BMC's lock-out counter sees one refused
// request per host, growing with the chassis, in the first minute.
// Ground truth: the 401s the BMC served, by the test's clock.
func TestReview35ao2_BasicAuthRotationRefusedPerMinuteGrowsWithHosts(t *testing.T) {
	for _, n := range []int{1, 2, 10} {
		perMin, total := rotation35ao2(t, n)
		t.Logf("hosts=%d: refused requests: at most %d in a minute, %d in 3 minutes", n, perMin, total)
		assert.LessOrEqual(t, perMin, 3,
			"hosts=%d: requests with the rotated password in one minute (one refused read, then AuthBackoff 30 s: at most two logins a minute); %d in 3 minutes", n, total)
	}
}

// TestReview35ao2_SecretCorrectedAfterRotationRecoversPromptly (review
// 35ao2; liveness after the fault is fixed: issue 35 "wrong and
// corrected credentials per host"). Ten hosts of one chassis with basic
// auth; the BMC's password is rotated, the hosts are polled for three
// minutes (own and credential back-offs), then every host's Secret is
// corrected: each host's next read must be answered (a new login, no
// back-off of the old credentials or of the host's own refusals).
func TestReview35ao2_SecretCorrectedAfterRotationRecoversPromptly(t *testing.T) {
	const n = 10
	clk := newClock()
	ch := newChassis35ao2(t, clk, n)
	newPass := "Rotated-n3w"
	b2 := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", newPass)
	for i := 2; i <= n; i++ {
		b2.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	old := ch.srv.Config.Handler
	ch.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); ch.rotated.Load() && ok && u == "admin" && p == newPass {
			b2.ServeHTTP(w, r)
			return
		}
		old.ServeHTTP(w, r)
	})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1), bmcPassword))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / n
	ch.rotated.Store(true)
	for round := 0; round < 36; round++ {
		for i := range hosts {
			clk.Advance(step)
			_, _ = hosts[i].State(ctx)
		}
	}
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1), newPass))
	}
	for i := range hosts {
		clk.Advance(step)
		_, err := hosts[i].State(ctx)
		assert.NoError(t, err, "host h%d after its Secret was corrected", i+1)
		clk.Advance(step)
		assert.NoError(t, hosts[i].Off(ctx, power.ModeSoft), "fence of host h%d after its Secret was corrected", i+1)
	}
}

// TestReview35ao2_OneBlade401RefusesIdleNeighboursFence (review 35ao2;
// issue 35 item 1: "a host's failure never refuses another host whose
// credentials differ or whose session is open"; "A fencing request for
// A is refused although its credentials are right"). One chassis, basic
// auth, hosts A (system 1) and B (system 2) with the same, right
// credentials: B connected and is idle (a host is read rarely), A is
// polled every 5 s. A's blade alone starts answering 401 (a per-blade
// privilege). No other host's call was answered within LoginInterval,
// so round 40's release takes A's 401 for the credentials': it backs
// them off and retires the session B shares; every later try of A is a
// login refused (counted against the credentials, doubling). B's fence
// (Off) two minutes later is refused with ErrBackoff, although the BMC
// answers B's credentials all along (ground truth: the BMC serves
// system 2 with them).
func TestReview35ao2_OneBlade401RefusesIdleNeighboursFence(t *testing.T) {
	clk := newClock()
	ch := newChassis35ao2(t, clk, 2)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1", bmcPassword))
	b := pool.Controller("b", ch.target("2", bmcPassword))
	_, err := b.State(ctx)
	require.NoError(t, err)
	clk.Advance(2 * time.Minute) // B idle
	_, err = a.State(ctx)
	require.NoError(t, err)

	ch.deny1.Store(true)
	var lastA error
	for i := 0; i < 24; i++ { // two minutes
		clk.Advance(5 * time.Second)
		_, lastA = a.State(ctx)
	}
	t.Logf("A's last read: %v", lastA)
	// Ground truth: the BMC answers B's credentials.
	direct, err := redfish.Connect(ctx, redfish.Config{Endpoint: ch.srv.URL, SystemID: "2", Username: "admin", Password: bmcPassword, RootCAs: ch.roots, BasicAuth: true})
	require.NoError(t, err)
	_, err = direct.State(ctx)
	require.NoError(t, err, "the BMC answers B's credentials")

	err = b.Off(ctx, power.ModeSoft)
	assert.NoError(t, err, "B's fence, its credentials right, refused for A's blade's 401")
	assert.NotErrorIs(t, err, power.ErrBackoff)
	// With the fault on: ten more minutes, A polled every 5 s, B's fence
	// retried every minute.
	refusedB, triesB := 0, 0
	for i := 1; i <= 120; i++ {
		clk.Advance(5 * time.Second)
		_, _ = a.State(ctx)
		if i%12 == 0 {
			triesB++
			if err := b.Off(ctx, power.ModeSoft); err != nil {
				refusedB++
				t.Logf("t+%ds B's fence: %v", i*5, err)
			}
		}
	}
	assert.Zero(t, refusedB, "B's fences refused in ten minutes (of %d), its credentials right all along", triesB)
}

// TestReview35ao2_TokenRotationKillsSessionsRefusedLoginsPerMinute
// (review 35ao2; package doc: "a BMC with a wrong password sees at most
// two logins a minute with it"; issue 35 items 1 and 6: logins inside
// calls go through the one-login rule and back-off). Ten hosts of one
// chassis share a token session; the BMC's password is changed and the
// BMC ends the sessions it had (a common BMC policy). Every host's next
// call meets a 401, re-logs in inside the call through the gate and is
// refused. Ground truth: the emulator's own login log (refused logins
// by the test's clock).
func TestReview35ao2_TokenRotationKillsSessionsRefusedLoginsPerMinute(t *testing.T) {
	const n = 10
	clk := newClock()
	b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	var rotated atomic.Bool
	var mu sync.Mutex
	oldTokens := map[string]bool{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := r.Header.Get("X-Auth-Token"); tok != "" {
			mu.Lock()
			dead := rotated.Load() && oldTokens[tok]
			if !rotated.Load() {
				oldTokens[tok] = true
			}
			mu.Unlock()
			if dead {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.NoValidSession","message":"session ended"}}`))
				return
			}
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	target := func(id string) power.Target {
		return power.Target{BMC: srv.URL, Config: "admin/" + bmcPassword, Connect: func(ctx context.Context) (power.Controller, error) {
			return redfish.Connect(ctx, redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, RootCAs: roots})
		}}
	}
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / n
	b.SetCredentials("admin", "Rotated-n3w")
	rotated.Store(true)
	for round := 0; round < 36; round++ {
		for i := range hosts {
			clk.Advance(step)
			_, _ = hosts[i].State(ctx)
		}
	}
	var refused []time.Time
	for _, l := range b.LoginLog() {
		if !l.OK {
			refused = append(refused, l.At)
		}
	}
	t.Logf("refused logins: %d in 3 minutes, at most %d in a minute", len(refused), maxPerMinute(refused))
	assert.LessOrEqual(t, maxPerMinute(refused), 2, "refused logins with the old password in any minute")
}
