package reboot_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40_FailedListingForgetsWatchedKeys: Loop.Keys that fails (an
// inventory's listing down, or forbidden) is not "a key no longer listed",
// yet two resyncs with a failed listing make the Runner forget every idle
// key and end its watch: a change of that host, which its (working) watch
// reports, is never reconciled while the listing stays down (liveness with
// the fault still on). The Runner's doc promises wake-ups are acted on and
// that it stops watching only keys "no longer listed".
func TestReview40_FailedListingForgetsWatchedKeys(t *testing.T) {
	var lists, passes atomic.Int32
	change := make(chan struct{})
	r := &reboot.Runner{Resync: 30 * time.Millisecond, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Keys: func(context.Context) ([]string, error) {
			if lists.Add(1) == 1 {
				return []string{"h"}, nil
			}
			return nil, errors.New("inventory listing unavailable")
		},
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			ch := make(chan struct{}, 1)
			go func() {
				defer close(ch)
				select {
				case <-ctx.Done():
				case <-change:
					ch <- struct{}{}
					<-ctx.Done()
				}
			}()
			return ch, nil
		},
	}}}
	stop := runFor(t, r)
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "first pass")
	// Several resyncs with the listing down.
	require.Eventually(t, func() bool { return lists.Load() >= 5 }, 10*time.Second, 5*time.Millisecond)
	before := passes.Load()
	close(change) // the host's record changes: its watch reports it
	require.Eventually(t, func() bool { return passes.Load() > before }, 3*time.Second, 5*time.Millisecond,
		"a change reported by the host's watch was never reconciled: the Runner forgot the host after failed listings (listings %d)", lists.Load())
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestReview40_AddWaitsForBlockingWatch: Runner.Add's doc says the key is
// "reconciled at once, and watched from now on", but since 5e1c266 a new
// key's first pass waits for the first try of its watch: a Watch that
// does not return (kube.RebootHosts.Watch blocks in the cache's
// the started cache's GetInformer until that informer syncs: a
// RebootRecord or BareMetalHost watch the role forbids, an API server
// that does not answer) leaves the key unreconciled until
// Resync (10 min by default), although nothing stops a pass.
func TestReview40_AddWaitsForBlockingWatch(t *testing.T) {
	var passes atomic.Int32
	r := &reboot.Runner{Resync: time.Hour, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "reboot",
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
		Watch: func(ctx context.Context, _ string) (<-chan struct{}, error) {
			<-ctx.Done() // an informer that never syncs
			return nil, ctx.Err()
		},
	}}}
	stop := runFor(t, r)
	require.NoError(t, r.Add("reboot", "h"))
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 3*time.Second, 5*time.Millisecond,
		"Add: the key was not reconciled at once (its first pass waits for a watch that does not return)")
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestReview40_PrefixLeaksMetal3KeysIntoStatus: WithPrefix says "they
// see metal3's keys, the store holds yours", but the Reconciler's
// Status.Seen (the requests of the pending reboot: annotation name and a
// hash of its value) is written to the store as it is, with metal3's
// names: a store with its own prefix holds reboot.metal3.io keys in every
// pending host's status (another tool reading the record with the store's
// prefix cannot match them to its requests).
func TestReview40_PrefixLeaksMetal3KeysIntoStatus(t *testing.T) {
	ctx := context.Background()
	raw := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	hosts, err := reboot.WithPrefix(raw, "reboot.example.com")
	require.NoError(t, err)
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	r := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond}}
	c := &reboot.Client{Hosts: hosts, Key: "fencing", Now: time.Now}
	_, err = c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	_, err = r.Reconcile(ctx, "h")
	require.NoError(t, err)
	h, err := raw.Get(ctx, "h")
	require.NoError(t, err)
	for k := range h.Annotations {
		require.False(t, strings.HasPrefix(k, "reboot.metal3.io"), "annotation %s in the store", k)
	}
	for _, s := range h.Status.Seen {
		require.False(t, strings.Contains(s, "reboot.metal3.io"), "Status.Seen in the store holds metal3's key: %q (annotations %v)", s, h.Annotations)
	}
}
