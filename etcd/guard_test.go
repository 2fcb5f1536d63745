package etcd

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// pauseGuard pauses before it asks the real Guard, when pause says so.
type pauseGuard struct {
	reboot.Guard
	pause func() <-chan struct{}
}

func (g pauseGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if ch := g.pause(); ch != nil {
		<-ch
	}
	return g.Guard.Hold(ctx)
}

// pauseOn pauses a power-on before it reaches the BMC.
type pauseOn struct {
	power.Controller
	pause func() <-chan struct{}
}

func (p pauseOn) On(ctx context.Context) error {
	if ch := p.pause(); ch != nil {
		<-ch
	}
	return p.Controller.On(ctx)
}

// TestPausedLeaderGuard (issue 40, point 3): a reboot.Reconciler fenced by
// Leadership.Guard decides a power-on (its write is done) and its process
// is paused (its network cut, so its lease is not renewed) past its
// lease's TTL, before it asks the Guard or after (inside the power call).
// Another candidate takes the leadership and fences the host for a
// client's request; the paused leader resumes: the power-on is refused
// (ErrNotLeader / the Guard's context ended) and the hardware (ground
// truth) stays off. Without a Guard (the Reconciler had no hook) the
// late power-on went through (reboot's TestPausedLeaderNoPowerOn shows
// it).
func TestPausedLeaderGuard(t *testing.T) {
	for _, at := range []string{"guard", "call"} {
		t.Run(at, func(t *testing.T) { pausedLeaderGuard(t, at) })
	}
}

func pausedLeaderGuard(t *testing.T, pauseAt string) {
	ctx := context.Background()
	pre := prefix(t)
	px := newProxy(t, endpoint)
	acli, err := clientv3.New(clientv3.Config{Endpoints: []string{px.addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer acli.Close()
	const ttl = 2
	ca := Candidate{Client: acli, Prefix: pre, ID: "a", TTL: ttl}
	sa, err := ca.NewSession(ctx)
	require.NoError(t, err)
	defer sa.Close()
	la, err := ca.Campaign(ctx, sa)
	require.NoError(t, err)

	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: `{"mode":"hard"}`}})
	cfg := reboot.Config{StaleReads: 5 * time.Second}
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pause := func() <-chan struct{} {
		h, _ := store.Get(ctx, "h")
		if _, ok := h.Annotations[reboot.Annotation]; ok {
			return nil // not the pass that powers on (its write removed the annotation)
		}
		var ch <-chan struct{}
		once.Do(func() { px.cut.Store(true); close(paused); ch = resume })
		return ch
	}
	var guard reboot.Guard = la.Guard()
	var pc power.Controller = hw
	if pauseAt == "guard" {
		guard = pauseGuard{Guard: guard, pause: pause}
	} else {
		pc = pauseOn{Controller: hw, pause: pause}
	}
	a := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: guard,
		Power: func(string) (power.Controller, error) { return pc, nil }}
	done := make(chan error, 1)
	go func() {
		for {
			res, err := a.Reconcile(ctx, "h")
			select {
			case <-paused:
				if err == nil {
					err = res.PowerErr
				}
				done <- err
				return
			default:
			}
			if err != nil {
				done <- err
				return
			}
			clk.Advance(time.Second)
		}
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("A stopped before the power-on: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("A never decided the power-on")
	}

	// B campaigns: it leads once A's lease ran out.
	lb, _ := lead(t, pre, "b", ttl)
	require.Greater(t, lb.Rev, la.Rev)
	b := &reboot.Reconciler{Hosts: store, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: lb.Guard(),
		Power: func(string) (power.Controller, error) { return hw, nil }}
	cl := &reboot.Client{Hosts: store, Key: "fencer", Now: clk.Now}
	tk, err := cl.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for i := 0; ; i++ {
		require.Less(t, i, 200, "B never fenced the host")
		_, err := b.Reconcile(ctx, "h")
		require.NoError(t, err)
		if ok, err := cl.Fenced(ctx, tk); err == nil && ok {
			break
		}
		clk.Advance(time.Second)
	}
	fencedAt := clk.Real()

	// A resumes, its network back.
	px.cut.Store(false)
	close(resume)
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("A's pass did not end")
	}
	if pauseAt == "guard" {
		assert.ErrorIs(t, err, reboot.ErrNotLeader)
		assert.ErrorIs(t, err, ErrNotLeader)
	} else {
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the power-on ran past the Guard's deadline")
	}
	clk.Advance(10 * time.Second)
	assert.False(t, hw.HardwareOn(), "the fenced host stays off")
	for _, tc := range hw.Truth() {
		assert.False(t, tc.On && !tc.At.Before(fencedAt), "powered on at %v after the client was told Fenced (%v)", tc.At, fencedAt)
	}
	// A's guard keeps refusing.
	_, _, err = la.Guard().Hold(ctx)
	assert.ErrorIs(t, err, reboot.ErrNotLeader)
}

// TestGuardResignEndsHeldContexts: a pass that took Hold's context before
// its process resigned must not go on acting with it once Resign is called
// (the next candidate takes over at once).
func TestGuardResignEndsHeldContexts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, _ := lead(t, prefix(t), "one", 30)
	hctx, hcancel, err := l.Guard().Hold(ctx)
	require.NoError(t, err)
	defer hcancel()
	require.NoError(t, hctx.Err())
	require.NoError(t, l.Resign(ctx))
	select {
	case <-hctx.Done():
	default:
		t.Fatal("a context Hold returned before Resign is still live after it")
	}
}

// TestGuardTermIsTheFencingToken: the Guard is a reboot.GuardTerm whose
// Term is the leadership's Rev, so that a reboot.Reconciler tells a Hold
// refused in doubt and granted again (the same leadership) from a new
// leadership, which another leader's calls may have preceded; two
// leaderships of one candidate have different Terms.
func TestGuardTermIsTheFencingToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := prefix(t)
	l, _ := lead(t, p, "one", 30)
	g, ok := l.Guard().(reboot.GuardTerm)
	require.True(t, ok, "the Guard is a reboot.GuardTerm")
	require.Zero(t, g.Term(), "not yet confirmed: no term")
	_, hcancel, err := g.Hold(ctx)
	require.NoError(t, err)
	hcancel()
	require.Equal(t, uint64(l.Rev), g.Term(), "confirmed by a Hold: the fencing token")
	require.NoError(t, l.Resign(ctx))
	require.Zero(t, g.Term(), "resigned: no term")
	l2, _ := lead(t, p, "one", 30)
	_, hcancel, err = l2.Guard().Hold(ctx)
	require.NoError(t, err)
	hcancel()
	t2 := l2.Guard().(reboot.GuardTerm).Term()
	require.NotZero(t, t2)
	require.NotEqual(t, uint64(l.Rev), t2, "a new leadership has a new Term")
}
