package power_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusalLog wraps an emulated BMC and records, on the test's clock, every
// request the BMC answered 401 that carried basic-auth credentials with
// password pw: the refused authentications the BMC saw (ground truth at
// the BMC's side: with basic auth every request is an authentication, and
// a BMC's lockout counts each).
type refusalLog struct {
	h   http.Handler
	now func() time.Time
	pw  string

	mu      sync.Mutex
	refused []time.Time
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

func (l *refusalLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	l.h.ServeHTTP(sw, r)
	a := r.Header.Get("Authorization")
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
	if sw.status == http.StatusUnauthorized && strings.HasPrefix(a, "Basic ") && strings.HasSuffix(string(raw), ":"+l.pw) {
		l.mu.Lock()
		l.refused = append(l.refused, l.now())
		l.mu.Unlock()
	}
}

func (l *refusalLog) times() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.refused...)
}

// basicChassis serves n systems behind one BMC, through a refusalLog.
func basicChassis(t *testing.T, n int, clk *manualClock) (*redfishtest.BMC, *httptest.Server, []*fake.Power, *refusalLog) {
	t.Helper()
	hw := []*fake.Power{fake.NewPower(time.Now, fake.PowerConfig{})}
	b := redfishtest.NewBMC(time.Now, hw[0], "admin", bmcPassword)
	for i := 2; i <= n; i++ {
		p := fake.NewPower(time.Now, fake.PowerConfig{})
		hw = append(hw, p)
		b.AddSystem(string(rune('0'+i)), p)
	}
	log := &refusalLog{h: b, now: clk.Now, pw: bmcPassword}
	srv := httptest.NewTLSServer(log)
	t.Cleanup(srv.Close)
	return b, srv, hw, log
}

// TestReview35_RotatedBasicAuthEachJoinerHammersBMC: five blades behind
// one service, one BasicAuth login. Host A connected (its shared session
// is open) and then has nothing to do (the kube controllers and the
// executor call a host only while an operation on it runs). The password
// is rotated on the BMC. Hosts B..E each get work and call State every
// 5 s for 5 minutes. Since f455107, a 401 met while joining backs the
// joining host off alone and leaves the shared session and the login's
// back-off alone; the joiners' failed attaches even keep the stale
// session from going idle (doneLocked refreshes lastUsed), so nothing
// ever retires it: every host tries the refused password on its own
// schedule. Ground truth (the BMC's side): 16 refused basic-auth
// authentications in 5 minutes, 8 in the first minute, where the package
// doc promises "a BMC with a wrong password sees at most two logins a
// minute with it, and fewer as the failures go on" (30 s doubling: at most
// 4 in 5 minutes). A BMC with an account lockout (iDRAC, iLO, OpenBMC's
// pam_faillock) locks the account out for every host and every operator.
func TestReview35_RotatedBasicAuthEachJoinerHammersBMC(t *testing.T) {
	clk := newClock()
	b, srv, _, log := basicChassis(t, 5, clk)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", basicTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	b.SetCredentials("admin", "rotated")

	var hosts []power.Controller
	for _, id := range []string{"2", "3", "4", "5"} {
		hosts = append(hosts, pool.Controller("h"+id, basicTarget(srv, id, bmcPassword)))
	}
	for step := 0; step < 60; step++ { // 5 minutes, a call every 5 s
		for _, h := range hosts {
			_, err := h.State(ctx)
			if err != nil {
				assert.ErrorIs(t, err, power.ErrAuth, "the operator is told the password is wrong")
			}
		}
		clk.Advance(5 * time.Second)
	}
	refused := log.times()
	t.Logf("refused basic-auth authentications at the BMC: %d in 5 min, at most %d in one minute", len(refused), maxPerMinute(refused))
	assert.LessOrEqual(t, maxPerMinute(refused), 2, "ground truth: the BMC saw more than two refused logins a minute with the wrong password")
	assert.LessOrEqual(t, len(refused), 5, "ground truth: the BMC saw more refused logins in 5 minutes than AuthBackoff doubling allows (4)")
}

// TestReview35_RecoveredAuthStillRefusesJoinerFence: three blades, one
// BasicAuth login, host A connected and idle. The BMC refuses the
// credentials for 10 minutes (its directory service for the account is
// down, or a rotation is rolled back on the BMC; the Secret never
// changes, so the Pool's login stays the same). Host B, which needs work,
// calls State every 5 s meanwhile: each refused join doubles B's own
// back-off (f455107: AuthBackoff doubling up to MaxAuthBackoff), which no
// success of its login ends. Once the BMC accepts the credentials again,
// host A's call with the very same credentials on the very same session
// succeeds, yet B's fence (a hard Off) is refused for minutes more with
// an error that says the password is wrong. The doc: "A success, or an
// answer from the BMC, ends the back-off of its login". Ground truth: the
// emulator accepts the credentials (A's read) and system 2 stays on.
func TestReview35_RecoveredAuthStillRefusesJoinerFence(t *testing.T) {
	clk := newClock()
	b, srv, hw, _ := basicChassis(t, 3, clk)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", basicTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)

	b.SetCredentials("admin", "directory-down")
	hostB := pool.Controller("b", basicTarget(srv, "2", bmcPassword))
	for step := 0; step < 120; step++ { // 10 minutes
		_, _ = hostB.State(ctx)
		clk.Advance(5 * time.Second)
	}
	b.SetCredentials("admin", bmcPassword) // the BMC accepts them again

	_, err = a.State(ctx)
	require.NoError(t, err, "ground truth: the BMC accepts the credentials again")
	clk.Advance(5 * time.Second)
	err = hostB.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "host B's fence was refused (its own back-off) after the same credentials worked for host A")
	assert.False(t, hw[1].HardwareOn(), "ground truth: system 2 is still on after its fence")
}

// deadBlade wraps an emulated BMC: every GET of path is answered 500 (the
// chassis manager cannot reach that blade), and every request is counted
// (ground truth at the BMC's side).
type deadBlade struct {
	h    http.Handler
	path string

	mu             sync.Mutex
	requests, dead int
}

func (d *deadBlade) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.requests++
	isDead := r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == d.path
	if isDead {
		d.dead++
	}
	d.mu.Unlock()
	if isDead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"code":"Base.1.8.InternalError","message":"the blade does not answer"}}`)
		return
	}
	d.h.ServeHTTP(w, r)
}

func (d *deadBlade) counts() (requests, dead int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests, d.dead
}

// TestReview35_FailedJoinNeverBacksOff: eight blades behind one chassis
// manager, one session login; host A connected. Blade 8's management path
// is dead: the manager answers every GET of /Systems/8 with 500. Host H
// (blade 8) is being remediated and its caller reads its state every 5 s.
// Each call finds the shared session open and joins it (Pool.attach):
// the join fails with neither ErrNoSystem nor ErrAuth, and since
// f455107/72c773f such a failure backs off nothing (ownLocked returns,
// the login is not counted): the next call joins again at once. Each join
// is the GET of the system and, on its failure, the listing of every
// system of the chassis (redfish.discover): 10 requests to the manager
// that serves the seven healthy blades, every 5 s, for as long as the
// blade is dead. The package doc: a failed Connect backs its login off
// "whatever the reason ... the one exception is a Connect that fails with
// ErrNoSystem" (which backs the host off alone); the same failure on the
// login path backs off (Backoff 1 s doubling up to 2 min: about 9 tries in
// 5 minutes). Ground truth: the manager's own request counts.
func TestReview35_FailedJoinNeverBacksOff(t *testing.T) {
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	b := redfishtest.NewBMC(time.Now, hw, "admin", bmcPassword)
	for i := 2; i <= 8; i++ {
		b.AddSystem(string(rune('0'+i)), fake.NewPower(time.Now, fake.PowerConfig{}))
	}
	d := &deadBlade{h: b, path: "/redfish/v1/Systems/8"}
	srv := httptest.NewTLSServer(d)
	t.Cleanup(srv.Close)
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", systemTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)
	before, _ := d.counts()

	h := pool.Controller("h", systemTarget(srv, "8", bmcPassword))
	for step := 0; step < 60; step++ { // 5 minutes, a call every 5 s
		_, err := h.State(ctx)
		require.Error(t, err)
		clk.Advance(5 * time.Second)
	}
	after, dead := d.counts()
	tries := dead / 2 // each join GETs /Systems/8, then lists every system, 8 included
	t.Logf("blade 8: %d joins in 5 min, %d requests to the chassis manager", tries, after-before)
	assert.LessOrEqual(t, tries, 12, "ground truth: the dead blade's joins were tried at the caller's rate, never backed off")
}

// TestReview35_TransientJoin401RefusesFenceForAuthBackoff: two blades,
// one BasicAuth login, host A connected. The BMC answers one GET of
// /Systems/2 with 401 although the credentials are right (HPE iLO, AMI
// and NVIDIA GB200/GB300 BMCs are known to answer intermittent 401s to
// valid credentials: dsx-ai-factory/infra-controller#69 and #5349 retry
// them; Supermicro: mrlhansen/idrac_exporter#178). Host B joins A's
// session at that moment. Since 72c773f discover returns that one 401 as
// ErrAuth without looking further (with basic auth), and since f455107
// the Pool backs host B alone off for AuthBackoff (30 s, doubling). Host
// A's call right after, with the same credentials on the same session,
// succeeds (the BMC accepts them), but B's fence one second later is
// refused with an error saying the password is wrong. The same 401 on a
// connected host's call costs nothing but that call: its next call is
// tried at once. Ground truth: system 2's hardware stays on.
func TestReview35_TransientJoin401RefusesFenceForAuthBackoff(t *testing.T) {
	clk := newClock()
	b, srv, hw, _ := basicChassis(t, 2, clk)
	pool := newPool(t, clk, power.PoolConfig{})
	ctx := context.Background()

	a := pool.Controller("a", basicTarget(srv, "1", bmcPassword))
	_, err := a.State(ctx)
	require.NoError(t, err)

	b.FailNextGet("/redfish/v1/Systems/2", http.StatusUnauthorized, "") // one intermittent 401
	hostB := pool.Controller("b", basicTarget(srv, "2", bmcPassword))
	_, _ = hostB.State(ctx)
	_, err = a.State(ctx)
	require.NoError(t, err, "ground truth: the BMC accepts the credentials")

	clk.Advance(time.Second)
	err = hostB.Off(ctx, power.ModeHard)
	assert.NoError(t, err, "host B's fence was refused for AuthBackoff after one intermittent 401 on valid credentials")
	assert.False(t, hw[1].HardwareOn(), "ground truth: system 2 is still on after its fence")
}
