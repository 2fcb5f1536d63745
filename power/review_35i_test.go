package power_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35_CloseLeavesJoinedSessionLoggedIn (bd0694c): blades 1 and 2
// behind one chassis manager (blade 2's system answered in 800 ms). Host
// A is connected: one session at the manager, idle. Host B's caller has a
// 300 ms deadline and gives up during B's join of A's session; since
// bd0694c the join goes on, detached, and holds the session open
// (session.joins). The process then shuts down: Pool.Close, which the
// package doc promises "closes every session (waiting up to 10 s for each
// BMC's logout)" and "logs every session out" (its only exceptions: a call
// running past its deadline, a login still running: neither is A's idle
// session). Close retires A's session but does not close it while joined,
// and does not wait for the join (not in p.wg): it returns with the
// session still logged in at the manager; a process exiting then never
// logs it out. Before bd0694c the caller itself waited for the join, so
// Close came after it. Ground truth: the emulator's own count of open
// sessions right after Close returns.
func TestReview35_CloseLeavesJoinedSessionLoggedIn(t *testing.T) {
	b, _, srv, _ := slowChassis(t, 800*time.Millisecond)
	pool := power.NewPool(power.PoolConfig{})
	ctx := context.Background()

	_, err := pool.Controller("a", systemTarget(srv, "1", bmcPassword)).State(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Sessions())

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pool.Controller("b", systemTarget(srv, "2", bmcPassword)).State(short)
	cancel()
	require.Error(t, err) // gave up during the join

	start := time.Now()
	require.NoError(t, pool.Close())
	open := b.Sessions()
	t.Logf("Close returned after %s; sessions open at the manager: %d", time.Since(start), open)
	assert.Equal(t, 0, open, "Close returned with A's idle session still logged in at the BMC (a detached join held it open)")
	time.Sleep(1500 * time.Millisecond) // the join ends; the session is logged out after Close
	t.Logf("1.5 s later: %d", b.Sessions())
}

// closingCtrl is a controller whose Close is counted (sessions open at
// the BMC).
type closingCtrl struct {
	power.Controller
	open *atomic.Int64
}

func (c *closingCtrl) Close() error { c.open.Add(-1); return nil }

// TestReview35_JoinedIdleSessionMakesProbeCloseItsOwn (bd0694c, point 2):
// a BMC with MaxSessions 1. Host A's session (login v1) is idle; host B,
// same login, joins it (its system answers in 800 ms). Host C, behind the
// same BMC with rotated credentials (login v2, not yet proven there),
// logs in one over the bound. The doc: "A login of credentials not yet
// proven is tried first, one over the bound ..., and only its success
// closes the least recently used idle session"; bd0694c: "a join is no use
// of the session: it stays on the idle list". But trim treats the joined
// session as in use: nothing is closed at C's login, and when C's call
// ends (doneLocked's trim) the only candidate left is C's own fresh
// session: it is closed, and the eviction stamp is set. A second later C
// is fenced (hard Off): it needs a login, the BMC is at the bound, and
// "one was closed for a login less than 1m0s ago": the fence is refused
// for a LoginInterval although C's credentials and BMC work. Ground truth:
// C's fake power is still on.
func TestReview35_JoinedIdleSessionMakesProbeCloseItsOwn(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1})
	ctx := context.Background()
	var open, logins atomic.Int64
	hwC := fake.NewPower(time.Now, fake.PowerConfig{})
	shared := func(slow time.Duration) power.Target {
		return power.Target{BMC: "https://chassis", Config: "v1", Login: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
			if power.ConnectInfoFrom(ctx).Shared != nil {
				select { // the blade's system answered late
				case <-time.After(slow):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
			}
			logins.Add(1)
			open.Add(1)
			return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
		}}
	}
	c := pool.Controller("c", power.Target{BMC: "https://chassis", Config: "v2", Login: "v2", Connect: func(ctx context.Context) (power.Controller, error) {
		logins.Add(1)
		open.Add(1)
		return &closingCtrl{Controller: hwC, open: &open}, nil
	}})

	_, err := pool.Controller("a", shared(0)).State(ctx)
	require.NoError(t, err)
	clk.Advance(10 * time.Second) // A's session idle

	joined := make(chan error, 1)
	go func() { _, err := pool.Controller("b", shared(800*time.Millisecond)).State(ctx); joined <- err }()
	time.Sleep(100 * time.Millisecond) // B's join runs

	_, err = c.State(ctx) // C's first login, one over the bound
	require.NoError(t, err)
	require.NoError(t, <-joined)
	time.Sleep(50 * time.Millisecond)
	t.Logf("after C's first call and B's join: sessions open %d, logins %d", open.Load(), logins.Load())

	clk.Advance(time.Second)
	err = c.Off(ctx, power.ModeHard) // the fence of C
	time.Sleep(50 * time.Millisecond)
	t.Logf("fence of C a second later: %v; sessions open %d, logins %d", err, open.Load(), logins.Load())
	assert.NoError(t, err, "C's fence was refused: its fresh session was closed in place of the idle, joined one")
	assert.False(t, hwC.HardwareOn(), "ground truth: C is still powered")
}

// TestReview35_CallReadsControllerAfterUnlock: acquire hands a call the
// host's controller by reading e.ctrl after it released p.mu
// (pool_login.go: "p.mu.Unlock(); return s, e.ctrl, nil"). A Forget of
// the host (or a Target change, a sweep, a trim, another host's call
// refused with ErrAuth retiring the shared session) running in that
// window sets e.ctrl to nil: the call gets a nil Controller and its
// goroutine panics calling State on it, taking the process (the kube
// controller, rebootctl) down; or it runs on another session's
// controller than the session it holds. The Pool is documented "safe for
// concurrent use". Without -race the call's goroutine (the Pool's, not
// the test's: nothing can recover it) panics within a second here, and
// the test binary dies with "nil pointer dereference" at pool_call.go's
// ctrl.State; under -race the read is reported as a data race.
func TestReview35_CallReadsControllerAfterUnlock(t *testing.T) {
	pool := newPool(t, nil, power.PoolConfig{})
	var open, logins atomic.Int64
	target := power.Target{BMC: "https://chassis", Config: "v1", Connect: func(ctx context.Context) (power.Controller, error) {
		if power.ConnectInfoFrom(ctx).Shared != nil {
			return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
		}
		logins.Add(1)
		open.Add(1)
		return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
	}}
	ctx := context.Background()
	_, err := pool.Controller("b", target).State(ctx) // keeps the shared session open
	require.NoError(t, err)
	stop := time.Now().Add(time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for time.Now().Before(stop) {
			pool.Forget("a")
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := pool.Controller("a", target)
			for time.Now().Before(stop) {
				_, _ = a.State(ctx)
			}
		}()
	}
	wg.Wait()
	<-done
}

// TestReview35_JoinKeepsBMCOverSessionBound (bd0694c): a BMC with
// MaxSessions 1. Host A's session (login v1) is idle; host B, same login,
// joins it (its system answers in 800 ms) for a caller that gives up at
// 300 ms. Host C (login v2, not yet proven) logs in during the join, one
// over the bound, for a caller that gives up too (the login takes
// 200 ms). C's login succeeds: trim keeps C's session and skips A's, being
// joined. Then the join ends, and nothing trims: neither the join's end
// nor a login whose caller left call trimLocked, and no call ends on
// either session. Two sessions stay open at the BMC until the idle sweep
// (IdleTimeout, 5 min by default). The doc: "A BMC never has more than
// MaxSessions sessions open through the Pool, but for one more while a
// login of credentials not yet proven there runs and until its success
// has the least recently used idle session logged out." Ground truth:
// the fake BMC's count of sessions open (logins not closed), two seconds
// after both ended.
func TestReview35_JoinKeepsBMCOverSessionBound(t *testing.T) {
	clk := newClock()
	pool := newPool(t, clk, power.PoolConfig{MaxSessions: 1})
	ctx := context.Background()
	var open, logins atomic.Int64
	login := func(name string, slow time.Duration) power.Target {
		return power.Target{BMC: "https://chassis", Config: name, Login: name, Connect: func(ctx context.Context) (power.Controller, error) {
			if power.ConnectInfoFrom(ctx).Shared != nil {
				slow = 800 * time.Millisecond // the blade's system answered late
			}
			select {
			case <-time.After(slow):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if power.ConnectInfoFrom(ctx).Shared != nil {
				return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
			}
			logins.Add(1)
			open.Add(1)
			return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
		}}
	}
	_, err := pool.Controller("a", login("v1", 0)).State(ctx)
	require.NoError(t, err)
	clk.Advance(10 * time.Second) // A's session idle

	joined := make(chan struct{})
	go func() {
		defer close(joined)
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, _ = pool.Controller("b", login("v1", 0)).State(short)
	}()
	time.Sleep(100 * time.Millisecond) // B's join runs
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = pool.Controller("c", login("v2", 200*time.Millisecond)).State(short)
	cancel()
	require.Error(t, err) // C's caller gave up; its login goes on
	<-joined
	time.Sleep(2 * time.Second) // the join (800 ms) and C's login (200 ms) are over
	t.Logf("sessions open at the BMC: %d (MaxSessions 1), logins %d", open.Load(), logins.Load())
	assert.LessOrEqual(t, open.Load(), int64(1), "the BMC stays over its session bound after the join and the login ended")
}

// TestReview35_HungJoinHoldsForgottenSessionOpen (bd0694c, Low): a join
// whose Connect does not return at its deadline (ConnectTimeout 300 ms;
// the adapter ignores it, as TestReview35_JoinIgnoringDeadlineBlocksCaller
// has it) keeps session.joins above zero for as long as it hangs. The
// Pool never gives up on it (a login has its overrun timer; a join has
// none), so once every host of the session is forgotten the session is
// retired but not logged out: it stays open at the BMC until the Connect
// returns, whenever that is. The doc: the join "goes on (bounded by
// ConnectTimeout)"; Forget: "its session is closed (in the background,
// bounded) unless other hosts use it". Ground truth: the fake BMC's count
// of sessions open, a second after both hosts were forgotten.
func TestReview35_HungJoinHoldsForgottenSessionOpen(t *testing.T) {
	pool := newPool(t, newClock(), power.PoolConfig{CallTimeout: 300 * time.Millisecond, ConnectTimeout: 300 * time.Millisecond})
	var open, logins atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	target := power.Target{BMC: "https://chassis", Config: "admin/v1", Connect: func(ctx context.Context) (power.Controller, error) {
		if power.ConnectInfoFrom(ctx).Shared != nil {
			<-release // the join's lookup ignores its deadline
			return nil, &power.Error{Op: "connect", Class: power.ClassBusy, Message: "late", Err: context.DeadlineExceeded}
		}
		logins.Add(1)
		open.Add(1)
		return &sharingFake{Controller: alwaysOn{}, logins: &logins, open: &open}, nil
	}}
	ctx := context.Background()
	_, err := pool.Controller("a", target).State(ctx)
	require.NoError(t, err)
	_, err = pool.Controller("b", target).State(ctx) // gives up at 300 ms; the join hangs on
	require.Error(t, err)
	pool.Forget("a")
	pool.Forget("b")
	time.Sleep(time.Second)
	t.Logf("sessions open at the BMC a second after every host was forgotten: %d", open.Load())
	assert.Zero(t, open.Load(), "the forgotten session is held open by a join that outlived ConnectTimeout")
}
