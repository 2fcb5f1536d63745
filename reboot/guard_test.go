package reboot_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// testLease is a leader lease on the fake clock: one holder, valid until
// expires.
type testLease struct {
	mu      sync.Mutex
	clk     *fake.Clock
	holder  string
	expires time.Time
	// holds are the contexts Hold gave out: they end when the lease
	// passes to another holder, as a real Guard's deadline would.
	holds []context.CancelFunc
}

func (l *testLease) give(id string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != l.holder {
		for _, c := range l.holds {
			c()
		}
		l.holds = nil
	}
	l.holder, l.expires = id, l.clk.Real().Add(d)
}

// leaseGuard is id's Guard over a testLease. When pause is set, Hold
// blocks first until the channel is closed (the process is paused there).
type leaseGuard struct {
	l     *testLease
	id    string
	pause func() <-chan struct{}
	holds int
}

func (g *leaseGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if g.pause != nil {
		if ch := g.pause(); ch != nil {
			<-ch
		}
	}
	g.l.mu.Lock()
	defer g.l.mu.Unlock()
	if g.l.holder != g.id || !g.l.clk.Real().Before(g.l.expires) {
		return nil, nil, fmt.Errorf("%w: lease held by %q", reboot.ErrNotLeader, g.l.holder)
	}
	g.holds++
	ctx, cancel := context.WithCancel(ctx)
	g.l.holds = append(g.l.holds, cancel)
	return ctx, cancel, nil
}

// pausedOn pauses before the power-on reaches the BMC.
type pausedOn struct {
	power.Controller
	pause func() <-chan struct{}
}

func (p pausedOn) On(ctx context.Context) error {
	if ch := p.pause(); ch != nil {
		<-ch
	}
	return p.Controller.On(ctx)
}

// TestPausedLeaderNoPowerOn (issue 40, point 3): leader A decides the
// power-on of a bare reboot (its versioned write is done) and is paused,
// across the end of its lease, either before it asks its Guard or after
// (inside the power call, before it reaches the BMC). B takes the lease
// and fences the host for a client's keyed request (the client is told
// Fenced). A resumes: its power-on is refused (ErrNotLeader, or the
// Guard's context ended), and the hardware (ground truth) stays off.
// Before the Guard hook (Reconciler had none) A's power-on went through
// after B's fencing (checked by the "call" case with Guard nil).
func TestPausedLeaderNoPowerOn(t *testing.T) {
	for _, at := range []string{"guard", "call"} {
		t.Run(at, func(t *testing.T) { pausedLeader(t, at) })
	}
}

func pausedLeader(t *testing.T, pauseAt string) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{Lag: time.Second})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: `{"mode":"hard"}`}})
	lease := &testLease{clk: clk}
	lease.give("a", time.Hour)
	cfg := reboot.Config{StaleReads: 5 * time.Second}
	pc := func(string) (power.Controller, error) { return hw, nil }

	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ga := &leaseGuard{l: lease, id: "a"}
	pause := func() <-chan struct{} {
		// The pass that powers on removes the bare annotation in its
		// write: pause at the Hold after it (the power call's).
		h, _ := store.Get(ctx, "h")
		if _, ok := h.Annotations[reboot.Annotation]; ok {
			return nil
		}
		var ch <-chan struct{}
		once.Do(func() { close(paused); ch = resume })
		return ch
	}
	apc := pc
	if pauseAt == "guard" {
		ga.pause = pause
	} else {
		apc = func(string) (power.Controller, error) { return pausedOn{Controller: hw, pause: pause}, nil }
	}
	a := &reboot.Reconciler{Hosts: store, Power: apc, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: ga}
	done := make(chan error, 1)
	go func() {
		for {
			res, err := a.Reconcile(ctx, "h")
			select {
			case <-paused:
				if err == nil {
					err = res.PowerErr
				}
				done <- err // the paused pass's outcome
				return
			default:
			}
			clk.Advance(time.Second)
		}
	}()
	select {
	case <-paused:
	case <-time.After(20 * time.Second):
		t.Fatalf("A never decided the power-on; truth %v", hw.Truth())
	}
	require.False(t, hw.HardwareOn(), "off while A is paused")

	// A's lease runs out while it is paused; B leads and fences the host.
	clk.Advance(time.Minute)
	lease.give("b", time.Hour)
	b := &reboot.Reconciler{Hosts: store, Power: pc, Now: clk.Now, Monotonic: clk.Monotonic, Config: cfg, Guard: &leaseGuard{l: lease, id: "b"}}
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

	// A resumes.
	close(resume)
	err = <-done
	if pauseAt == "guard" {
		assert.ErrorIs(t, err, reboot.ErrNotLeader)
	} else {
		assert.ErrorIs(t, err, context.Canceled, "the power-on ran on an ended Hold")
	}
	clk.Advance(10 * time.Second)
	assert.False(t, hw.HardwareOn(), "the fenced host stays off")
	for _, tc := range hw.Truth() {
		assert.False(t, tc.On && !tc.At.Before(fencedAt), "powered on at %v after the client was told Fenced (%v)", tc.At, fencedAt)
	}
}

// TestGuardRefusesEveryWrite (issue 40, point 3): a Reconciler whose Guard
// says it is not the leader writes nothing and makes no power call (store
// version and the fake BMC's call log unchanged), and says why.
func TestGuardRefusesEveryWrite(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: ""}})
	lease := &testLease{clk: clk}
	lease.give("b", time.Hour)
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now, Guard: &leaseGuard{l: lease, id: "a"},
		Power: func(string) (power.Controller, error) { return hw, nil }}
	for i := 0; i < 3; i++ {
		_, err := r.Reconcile(ctx, "h")
		require.ErrorIs(t, err, reboot.ErrNotLeader)
		assert.Contains(t, err.Error(), `"b"`)
		clk.Advance(time.Minute)
	}
	assert.Zero(t, store.Updates(), "a write went through")
	for _, c := range hw.Calls() {
		assert.Equal(t, fake.OpState, c.Op, "a power call went through")
	}
}
