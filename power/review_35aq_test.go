package power_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35aq_ConfirmedRefusalNeverRechecked (review 35aq; issue 35
// item 1 "A fencing request for A is refused although its credentials
// are right"; power/doc.go "unless they back off after a confirmed
// refusal (a check that refused them: the retry sends the refused
// password once)"). A and B share the credentials on one chassis. The
// BMC refuses the credentials for a while (an account lock-out, an
// LDAP outage: the same password works again afterwards): B's read is
// refused, the check is refused too, creds.confirmed is set. The BMC
// then takes the password again, but A's blade starts answering 401 (a
// per-blade privilege). creds.confirmed is cleared only by a success
// (succeededLocked), and callInfoLocked asks for no check while
// cr.auth && cr.confirmed: every later refusal of A's blade is taken
// for the credentials' (ErrAuth, unchecked) and doubles their back-off,
// A's polls win each end of it, and B's fences are refused for ten
// minutes although the BMC answers B's credentials all along after the
// lock-out (ground truth: a direct read of system 2). "The retry sends
// the refused password once": here it is sent at every end of the
// back-off, unchecked, for ever.
func TestReview35aq_ConfirmedRefusalNeverRechecked(t *testing.T) {
	clk := newClock()
	ch := newChassis35ap(t, clk, 2, redfishtest.Quirks{})
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)

	ch.b.SetCredentials("admin", "Locked-0ut") // the BMC refuses the password for a while
	clk.Advance(5 * time.Second)
	_, errB := b.State(ctx)
	t.Logf("B's read during the lock-out: %v", errB)
	require.Error(t, errB)
	ch.b.SetCredentials("admin", bmcPassword) // the lock-out ends
	ch.mu.Lock()
	before := len(ch.paths)
	ch.mu.Unlock()
	ch.deny1.Store(true) // and A's blade refuses
	ch.directState(t, "2")

	refusedB, triesB := 0, 0
	for i := 1; i <= 120; i++ { // ten minutes, A polled every 5 s, B's fence every minute
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
	ch.directState(t, "2")
	ch.mu.Lock()
	after := append([]string(nil), ch.paths[before:]...)
	ch.mu.Unlock()
	for _, p := range after {
		require.True(t, strings.HasPrefix(p, "/redfish/v1/Systems/1"), "ground truth: after the lock-out the BMC refused only system 1 (%v)", after)
	}
	t.Logf("401s served after the lock-out: %d, all system 1's", len(after))
	assert.Less(t, refusedB, triesB/2, "B's fences refused for ten minutes (%d of %d) after a lock-out that ended, for A's blade's 401 never checked again", refusedB, triesB)
}

// hooked35aq is newChassis35ap with a hook for every path (hook returns
// true if it answered) and a count of the check's reads served.
type hooked35aq struct {
	*chassis35ap
	hook     atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
	ssReads  atomic.Int64 // /redfish/v1/SessionService requests served
	sysReads atomic.Int64 // /redfish/v1/Systems (collection) requests served
}

func newHooked35aq(t *testing.T, clk *manualClock, n int) *hooked35aq {
	h := &hooked35aq{chassis35ap: newChassis35ap(t, clk, n, redfishtest.Quirks{})}
	inner := h.srv.Config.Handler
	h.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimSuffix(r.URL.Path, "/") {
		case "/redfish/v1/SessionService":
			h.ssReads.Add(1)
		case "/redfish/v1/Systems":
			h.sysReads.Add(1)
		}
		if f := h.hook.Load(); f != nil && (*f)(w, r) {
			return
		}
		inner.ServeHTTP(w, r)
	})
	return h
}

// TestReview35aq_StaleVerdictReusedAcrossRotation (review 35aq; brief:
// "a verdict reused across a rotation"; CallInfo.Check "a verdict
// obtained since the call began is taken without a new request";
// power/redfish doc: CredentialsWork means "the BMC refuses this system
// only"). A, B and C share the credentials on one chassis. A's read is
// slow (its system's request held 300 ms by the BMC). While it is held,
// B's blade refuses B's read: the check answers, CredentialsWork. Then
// the password is rotated, and A's held request is answered 401: the
// credentials', not A's system's (ground truth: the emulator refuses
// the old password; A's blade was never denied). Pool.check
// (callinfo.go) takes the verdict of the check done before the rotation
// because it ended after A's call began (r.seq > began): A's refusal
// becomes ErrSystemRefused, release calls succeededLocked (the
// credentials' back-off and failure count reset) and no request asks the
// BMC after the rotation (ground truth: SessionService reads served).
func TestReview35aq_StaleVerdictReusedAcrossRotation(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 3)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	c := pool.Controller("c", ch.target("3"))
	for _, h := range []power.Controller{a, b, c} {
		_, err := h.State(ctx)
		require.NoError(t, err)
	}
	clk.Advance(5 * time.Second)

	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/1"):
			once.Do(func() { close(held) })
			<-release
		case strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/2"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InsufficientPrivilege","message":"not allowed"}}`))
			return true
		}
		return false
	}
	ch.hook.Store(&hook)
	errA := make(chan error, 1)
	go func() { _, err := a.State(ctx); errA <- err }()
	<-held
	_, errB := b.State(ctx)
	t.Logf("B's read (its blade refuses): %v", errB)
	require.ErrorIs(t, errB, power.ErrSystemRefused, "precondition: B's blade's refusal checked, the credentials answered")

	ch.b.SetCredentials("admin", "Rotated-n3w")
	ssBefore := ch.ssReads.Load()
	close(release)
	err := <-errA
	t.Logf("A's read, answered 401 after the rotation: %v", err)
	t.Logf("SessionService reads after the rotation: %d", ch.ssReads.Load()-ssBefore)
	assert.NotErrorIs(t, err, power.ErrSystemRefused, "A's 401 came after the password was rotated (the credentials'), taken for A's system's on a verdict from before the rotation, with no request to the BMC since")
}

// TestReview35aq_CheckOutlivesClose (review 35aq; REVIEW.md "Cancel and
// end: after a plan is stopped ... nothing of it may start"; brief: "the
// detached check context outliving the Pool's Close or a Forget";
// CallInfo.Check "runs read detached from the caller ... bounded by
// CallTimeout"). A and B share the credentials on one chassis; A's blade
// answers 401 and the SessionService read of the check is slow. A's
// caller gives up during the check (ErrCheckCut), then the Pool is
// closed and Close returns. The check goes on, detached, and sends its
// second request with the credentials (the Systems collection) after
// Close returned (ground truth: the requests the BMC served after it).
func TestReview35aq_CheckOutlivesClose(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 2)
	pool := power.NewPool(power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, Now: clk.Now})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	for _, h := range []power.Controller{a, b} {
		_, err := h.State(ctx)
		require.NoError(t, err)
	}
	release := make(chan struct{})
	inCheck := make(chan struct{})
	var once sync.Once
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/SessionService" {
			once.Do(func() { close(inCheck) })
			<-release
		}
		return false
	}
	ch.hook.Store(&hook)
	ch.deny1.Store(true)
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-inCheck; time.Sleep(20 * time.Millisecond); cancel() }()
	_, errA := a.State(cctx)
	t.Logf("A's read, its caller gone during the check: %v", errA)
	require.NoError(t, pool.Close())
	ss, sys := ch.ssReads.Load(), ch.sysReads.Load()
	close(release)
	time.Sleep(300 * time.Millisecond)
	ss2, sys2 := ch.ssReads.Load(), ch.sysReads.Load()
	t.Logf("after Close returned: SessionService reads %d, Systems collection reads %d", ss2-ss, sys2-sys)
	assert.Equal(t, sys, sys2, "requests with the credentials sent to the BMC after the Pool's Close returned")
}

// TestReview35aq_ForgetDuringCheckLosesRefusal (review 35aq; power doc
// "Between two logins to a BMC with credentials it refused last there
// are at least AuthBackoff ... (a Forget of every host using them does
// not shorten it)"; brief: "hosts joining and leaving (churn, Forget)
// mid-check"). A and B share the credentials on one chassis; the
// password is rotated; A's read is refused and its check is slow. A's
// caller gives up (ErrCheckCut), and both hosts are forgotten (an
// inventory reload) while the check runs: gcLocked drops the creds
// record (no back-off yet, nobody uses it). The check is then refused
// and counted on the dropped record; host C, re-added with the same
// credentials a second later, sends the refused password at once
// (ground truth: the 401s the emulator served, three in a second).
func TestReview35aq_ForgetDuringCheckLosesRefusal(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 3)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	for _, h := range []power.Controller{a, b} {
		_, err := h.State(ctx)
		require.NoError(t, err)
	}
	clk.Advance(5 * time.Second)
	release := make(chan struct{})
	inCheck := make(chan struct{})
	var once sync.Once
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/SessionService" {
			once.Do(func() { close(inCheck) })
			<-release
		}
		return false
	}
	ch.hook.Store(&hook)
	ch.b.SetCredentials("admin", "Rotated-n3w")
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-inCheck; time.Sleep(20 * time.Millisecond); cancel() }()
	_, errA := a.State(cctx)
	t.Logf("A's read, its caller gone during the check: %v", errA)
	pool.Forget("a")
	pool.Forget("b")
	close(release)
	time.Sleep(200 * time.Millisecond) // the check is answered (401) and counted
	ch.hook.Store(nil)
	clk.Advance(time.Second)
	c := pool.Controller("c", ch.target("3"))
	_, errC := c.State(ctx)
	t.Logf("C's read a second later: %v", errC)
	r := ch.refusals()
	ch.mu.Lock()
	t.Logf("401s served: %d %v", len(r), ch.paths)
	ch.mu.Unlock()
	assert.LessOrEqual(t, len(r), 2, "the rotated password sent again a second after the BMC refused it twice (A's read and its check): the check's refusal was lost with the Forget")
}

// rotation35aq is rotation35ap on a chassis whose check resources answer
// anyone (mode "open": the emulator's own JSON, whatever the credentials:
// CredentialsWork) or answer junk ("junk": a 200 that is no resource:
// VerdictUnknown), once the password is rotated. It returns the most
// 401s served in a minute and in all (three minutes).
func rotation35aq(t *testing.T, n int, mode string) (int, int) {
	return rotationOp35aq(t, n, mode, func(ctx context.Context, h power.Controller) { _, _ = h.State(ctx) })
}

// rotationOp35aq is rotation35aq with op (a read, or a fence) as each
// host's call every 5 s after the rotation.
func rotationOp35aq(t *testing.T, n int, mode string, op func(context.Context, power.Controller)) (int, int) {
	clk := newClock()
	ch := newHooked35aq(t, clk, n)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / time.Duration(n)
	const rotated = "Rotated-n3w"
	ch.b.SetCredentials("admin", rotated)
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		p := strings.TrimSuffix(r.URL.Path, "/")
		if p != "/redfish/v1/SessionService" && p != "/redfish/v1/Systems" {
			return false
		}
		if mode == "junk" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return true
		}
		r2 := r.Clone(r.Context())
		r2.SetBasicAuth("admin", rotated) // served to anyone
		rec := httptest.NewRecorder()
		ch.b.ServeHTTP(rec, r2)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return true
	}
	ch.hook.Store(&hook)
	for round := 0; round < 36; round++ {
		for i := range hosts {
			clk.Advance(step)
			op(ctx, hosts[i])
		}
	}
	r := ch.refusals()
	return maxPerMinute(r), len(r)
}

// TestReview35aq_RotationUnprovenCheckRefusedPerMinute (review 35aq;
// coverage, the brief's "lock-out budget per minute for 1, 10, 100 hosts
// with the check always Unknown" and "a BMC that serves both resources
// to anyone"; power doc: "up to one refused request per host per
// back-off"). Asserts the documented bound: at most two refused
// requests per host in a minute (AuthBackoff 30 s). Ground truth: the
// 401s the emulator served.
func TestReview35aq_RotationUnprovenCheckRefusedPerMinute(t *testing.T) {
	for _, mode := range []string{"junk", "open"} {
		for _, n := range []int{1, 10, 100} {
			perMin, total := rotation35aq(t, n, mode)
			t.Logf("%s: hosts=%d: refused requests: at most %d in a minute, %d in 3 minutes", mode, n, perMin, total)
			assert.LessOrEqual(t, perMin, 2*n+1, "%s: hosts=%d", mode, n)
		}
	}
}

// TestReview35aq_FenceRetriesBypassUncheckedBackoff (review 35aq; power
// doc "One that answers neither gets VerdictUnknown, and then each host
// refused backs off alone: after a password rotation the BMC sees up to
// one refused request per host per back-off"; "a fence is tried: it
// costs at most one more refused request"; REVIEW.md "commands in a
// loop (a remediation retrying)"). The password is rotated on a chassis
// whose check gets no authenticated answer (VerdictUnknown); each host's
// fence (soft Off) is retried every 5 s. fenceTried (pool_login.go)
// lets every power command of a host backing off after an unchecked
// refusal through, each time, and no check ever confirms the refusal:
// the refused password goes out with every retry, for every host, as
// if nothing backed off (ground truth: the 401s the emulator served,
// against 2n+1 a minute, the documented per-host-per-back-off bound).
func TestReview35aq_FenceRetriesBypassUncheckedBackoff(t *testing.T) {
	off := func(ctx context.Context, h power.Controller) { _ = h.Off(ctx, power.ModeSoft) }
	for _, n := range []int{2, 10} {
		perMin, total := rotationOp35aq(t, n, "junk", off)
		t.Logf("hosts=%d, fences retried every 5 s: refused requests: at most %d in a minute, %d in 3 minutes", n, perMin, total)
		assert.LessOrEqual(t, perMin, 2*n+1, "hosts=%d: requests refused with the rotated password in one minute (fence retries), %d in 3 minutes", n, total)
	}
}
