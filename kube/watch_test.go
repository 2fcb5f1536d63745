package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestRebootHostsWatch: RebootHosts with a manager's informers is a
// reboot.HostWatcher, so a reboot Client that polls only every ten minutes
// still learns within seconds that its host is fenced and then rebooted;
// the watch's channel closes with its context.
func TestRebootHostsWatch(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	newBMH(t, direct, ns, "h1")
	mgr := namespacedManager(t, ns)
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	hosts := &RebootHosts{Client: mgr.GetClient(), Namespace: ns, Informers: mgr.GetCache()}
	rec := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rec, Namespace: ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))

	// The client reads directly (a cache may not show its own request yet)
	// and is woken by the manager's informers.
	cl := &reboot.Client{Hosts: &RebootHosts{Client: direct, Namespace: ns, Informers: mgr.GetCache()}, Key: "fencer", Now: time.Now, Poll: 10 * time.Minute}
	tk, err := cl.Request(ctx, "h1", power.ModeHard)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	require.NoError(t, cl.WaitFenced(wctx, tk), "fenced, learnt from the watch")
	assert.False(t, hw.HardwareOn())
	require.NoError(t, cl.Release(ctx, tk))
	require.NoError(t, cl.WaitDone(wctx, tk), "rebooted, learnt from the watch")
	// Done means the power-on was decided and recorded (before it is sent).
	for end := time.Now().Add(10 * time.Second); !hw.HardwareOn() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, hw.HardwareOn())

	c2, stop := context.WithCancel(ctx)
	ch, err := hosts.Watch(c2, "h1")
	require.NoError(t, err)
	stop()
	for range ch { // drains, then ends: closed with its context
	}
	_, err = (&RebootHosts{Client: direct, Namespace: ns}).Watch(ctx, "h1")
	assert.ErrorIs(t, err, ErrNoWatch)
}
