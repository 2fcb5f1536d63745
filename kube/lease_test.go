package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// freezer models a paused process: once frozen, its lease renewals and its
// power calls wait until thawed (ignoring their contexts, as a stopped
// process notices nothing), and the power call then runs with a context
// that was never cancelled (the process resumes before it learns anything).
type freezer struct {
	mu     sync.Mutex
	frozen chan struct{} // closed by thaw; nil when not frozen
	onCall chan struct{} // receives when a power-on is caught
}

func (f *freezer) wait() {
	f.mu.Lock()
	ch := f.frozen
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = make(chan struct{})
	f.mu.Unlock()
}

func (f *freezer) thaw() {
	f.mu.Lock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen = nil
	}
	f.mu.Unlock()
}

// frozenLock is a lock whose writes wait while the process is frozen.
type frozenLock struct {
	resourcelock.Interface
	f *freezer
}

func (l frozenLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.f.wait()
	return l.Interface.Update(ctx, ler)
}

func (l frozenLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.f.wait()
	return l.Interface.Get(ctx)
}

// pauser catches the first power-on after arm: the process freezes right
// after the versioned write that decided it, before the call.
type pauser struct {
	power.Controller
	f     *freezer
	armed chan struct{}
	once  sync.Once
}

func (p *pauser) On(ctx context.Context) error {
	select {
	case <-p.armed:
		caught := false
		p.once.Do(func() { caught = true })
		if caught {
			p.f.freeze()
			p.f.onCall <- struct{}{}
			p.f.wait()
			ctx = context.Background() // resumed before any cancellation arrives
		}
	default:
	}
	return p.Controller.On(ctx)
}

// TestNoPowerCallAfterLeaseLost (issue 28, B7): leader A decides a power-on
// (its versioned write is done) and is paused before the call, across the
// expiry of its lease. Leader B takes over and fences the host for a
// client's request (the client is told Fenced). A resumes: its power-on is
// refused, the host stays off. On the old code (no guard) A's power-on went
// through after B's fencing.
func TestNoPowerCallAfterLeaseLost(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	const lease, renew, retry = 3 * time.Second, 2 * time.Second, 250 * time.Millisecond
	fr := &freezer{onCall: make(chan struct{}, 1)}
	armed := make(chan struct{})

	var wg sync.WaitGroup
	start := func(id string, frozen bool) ctrl.Manager {
		guard, err := NewLeaseGuard(cfg, ns, "rebootkit-lease-test", id, lease, renew)
		require.NoError(t, err)
		if frozen {
			guard.Lock = frozenLock{Interface: guard.Lock, f: fr}
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			Cache:          cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
			LeaderElection: true, LeaderElectionID: "rebootkit-lease-test", LeaderElectionNamespace: ns,
			LeaderElectionResourceLockInterface: guard, LeaseDuration: ptrTo(lease), RenewDeadline: ptrTo(renew), RetryPeriod: ptrTo(retry)})
		require.NoError(t, err)
		pc := guard.Wrap(hw)
		if frozen {
			pc = &pauser{Controller: pc, f: fr, armed: armed}
		}
		rec := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
			Power:  func(string) (power.Controller, error) { return pc, nil },
			Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
		require.NoError(t, (&RebootController{Name: "reboot-" + id, Reconciler: rec, Namespace: ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
		wg.Add(1)
		go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
		return mgr
	}
	defer func() { fr.thaw(); cancel(); wg.Wait() }()

	a := start("a-"+ns, true)
	select {
	case <-a.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("A not elected")
	}
	start("b-"+ns, false)

	// A bare reboot: A powers off, then decides the power-on and is
	// paused before the call.
	close(armed)
	annotate := func(k, v string) {
		var bmh metal3.BareMetalHost
		require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &bmh))
		if bmh.Annotations == nil {
			bmh.Annotations = map[string]string{}
		}
		bmh.Annotations[k] = v
		require.NoError(t, direct.Update(ctx, &bmh))
	}
	annotate(reboot.Annotation, `{"mode":"hard"}`)
	select {
	case <-fr.onCall:
	case <-time.After(30 * time.Second):
		t.Fatalf("A never decided the power-on; power %v", hw.Truth())
	}
	require.False(t, hw.HardwareOn(), "off while A is paused")

	// A fencing client asks; B takes over after A's lease expired and
	// fences the host.
	cl := &reboot.Client{Hosts: &RebootHosts{Client: direct, Namespace: ns}, Key: "fencer", Now: time.Now, Poll: 100 * time.Millisecond}
	tk, err := cl.Request(ctx, "h1", power.ModeHard)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	require.NoError(t, cl.WaitFenced(wctx, tk), "B fences the host")
	fencedAt := time.Now()

	// A resumes.
	fr.thaw()
	time.Sleep(2 * time.Second)
	assert.False(t, hw.HardwareOn(), "the fenced host stays off")
	for _, tc := range hw.Truth() {
		assert.False(t, tc.On && tc.At.After(fencedAt.Add(-time.Second)), "powered on at %v after the client was told Fenced (%v)", tc.At, fencedAt)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestLeaseGuardUsesRecordDuration (issue 39, point 7): the guard's lease
// ends where the other candidates think it ends: the renewal plus the
// record's whole leaseDurationSeconds, as client-go writes them, not the
// configured duration. With 1800ms the record says 1 s: power calls stop
// 1 s minus the margin after the renewal, not 1.8 s minus it. (Under 1 s
// the record would say 0, which the API server refuses.) On the old code
// calls passed until 1.8 s (2.5 s) minus the margin.
func TestLeaseGuardUsesRecordDuration(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	ns := newNamespace(t, adminClient(t))
	for _, tc := range []struct {
		dur       time.Duration
		heldAt    time.Duration // held just after the write
		notHeldAt time.Duration
	}{
		{dur: 1800 * time.Millisecond, heldAt: 950 * time.Millisecond, notHeldAt: 970 * time.Millisecond},
		{dur: 2500 * time.Millisecond, heldAt: 1950 * time.Millisecond, notHeldAt: 1970 * time.Millisecond},
		{dur: 3 * time.Second, heldAt: 2950 * time.Millisecond, notHeldAt: 2970 * time.Millisecond},
	} {
		// The clock is read by the guard's watch goroutine too.
		var mono atomic.Int64
		g, err := NewLeaseGuard(cfg, ns, "lease-"+tc.dur.String(), "me", tc.dur, tc.dur/2)
		require.NoError(t, err)
		g.Monotonic = func() time.Duration { return time.Duration(mono.Load()) }
		g.Margin = 40 * time.Millisecond
		now := metav1.Now()
		// What client-go's leader election writes.
		ler := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: int(tc.dur / time.Second),
			AcquireTime: now, RenewTime: now}
		require.NoError(t, g.Create(ctx, ler))
		if tc.heldAt > 0 {
			mono.Store(int64(tc.heldAt))
			assert.True(t, g.Held(), "%v: held at %v", tc.dur, tc.heldAt)
		}
		mono.Store(int64(tc.notHeldAt))
		assert.False(t, g.Held(), "%v: other candidates may take a lease of %d s: not held at %v", tc.dur, ler.LeaseDurationSeconds, tc.notHeldAt)
		pc := g.Wrap(fake.NewPower(time.Now, fake.PowerConfig{}))
		assert.ErrorIs(t, pc.Off(ctx, power.ModeHard), ErrNotLeader)
	}
}

// TestLeaseGuardTermKeptUnlessLapsed: LeaseGuard is a reboot.GuardTerm. A
// renewal sent while the lease is still valid keeps the Term (a Hold
// refused inside the margin meanwhile was no change of leader); one sent
// after the lease ran out unrenewed begins a new Term (another candidate
// may have led in between, whether or not the watch saw it), and so does
// a write after the Lease was released.
func TestLeaseGuardTermKeptUnlessLapsed(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	ns := newNamespace(t, adminClient(t))
	var mono atomic.Int64 // read by the guard's watch goroutine too
	g, err := NewLeaseGuard(cfg, ns, "lease-term", "me", 10*time.Second, 5*time.Second)
	require.NoError(t, err)
	g.Monotonic = func() time.Duration { return time.Duration(mono.Load()) }
	var gt reboot.GuardTerm = g
	now := metav1.Now()
	ler := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 10, AcquireTime: now, RenewTime: now}
	require.NoError(t, g.Create(ctx, ler))
	t1 := gt.Term()
	require.NotZero(t, t1)
	// Inside the margin (the last 10/3 s): refused, the lease still held.
	mono.Store(int64(8 * time.Second))
	require.False(t, g.Held(), "inside the margin")
	require.Equal(t, t1, gt.Term(), "inside the margin: the same term")
	update := func() {
		t.Helper()
		cur, _, err := g.Get(ctx)
		require.NoError(t, err)
		cur.RenewTime = metav1.Now()
		require.NoError(t, g.Update(ctx, *cur))
	}
	update() // sent at 8 s, before the lease's end at 10 s
	require.True(t, g.Held())
	require.Equal(t, t1, gt.Term(), "a renewal in time keeps the term")
	// Run out unrenewed: the renewal is sent after the lease's end (18 s).
	mono.Store(int64(19 * time.Second))
	require.Zero(t, gt.Term(), "run out: no term")
	update()
	require.True(t, g.Held())
	t2 := gt.Term()
	require.NotEqual(t, t1, t2, "a renewal sent after the lease ran out begins a new term")
	// Released (a record naming no holder), then held again.
	rel := ler
	rel.HolderIdentity, rel.RenewTime = "", metav1.Now()
	cur, _, err := g.Get(ctx)
	require.NoError(t, err)
	rel.AcquireTime = cur.AcquireTime
	require.NoError(t, g.Update(ctx, rel))
	require.False(t, g.Held(), "released")
	require.Zero(t, gt.Term(), "released: no term")
	mono.Store(int64(20 * time.Second))
	update2, _, err := g.Get(ctx)
	require.NoError(t, err)
	update2.HolderIdentity, update2.LeaseDurationSeconds, update2.RenewTime = "me", 10, metav1.Now()
	require.NoError(t, g.Update(ctx, *update2))
	require.True(t, g.Held())
	require.NotEqual(t, t2, gt.Term(), "held again after a release: a new term")
}
