package remediationtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// ownWritesCluster is a MachineStore (the fake Cluster) whose Watch is a
// notifier fired by its own SaveState only, the natural in-process
// watcher of a store: a change made by another writer (the health checker
// marking the Machine, its Node going NotReady) is never reported.
type ownWritesCluster struct {
	*fake.Cluster
	mu   sync.Mutex
	subs map[string][]chan struct{}
}

func (c *ownWritesCluster) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	out := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[name] = append(c.subs[name], ch)
	c.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				c.mu.Lock()
				for i, s := range c.subs[name] {
					if s == ch {
						c.subs[name] = append(c.subs[name][:i], c.subs[name][i+1:]...)
						break
					}
				}
				c.mu.Unlock()
				return
			case <-ch:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

func (c *ownWritesCluster) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	if err := c.Cluster.SaveState(ctx, name, version, s); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.subs[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// clusterWorld plays the health checker and kubelets on the fake Cluster.
type clusterWorld struct{ c *fake.Cluster }

func (w clusterWorld) SetNeedsRemediation(_ context.Context, m string, on bool) error {
	w.c.SetNeedsRemediation(m, on)
	return nil
}
func (w clusterWorld) PutNode(_ context.Context, n remediation.Node) error {
	w.c.PutNode(n)
	return nil
}
func (w clusterWorld) SetNodeReady(_ context.Context, n string, ready bool) error {
	w.c.SetNodeReady(n, ready)
	return nil
}

// TestReview40c_ContractPassesWatchBlindToHealthChecker: Loop's doc
// promises a Machine is woken when it changes: "the health checker marks
// it unhealthy, another writer saves its State"; a store that can watch
// is never polled. The kit's MachineWatcher check (round 2's fix) writes
// only through SaveState, the Loop's own write: a Watch fired by the
// store's SaveState alone (blind to the health checker's mark, the one
// change that starts a remediation) passes Contract, even with
// Stores.World set, which could make that mark. Under the Runner such a
// Machine marked unhealthy waits for the next Resync.
func TestReview40c_ContractPassesWatchBlindToHealthChecker(t *testing.T) {
	t.Parallel()
	// Ground truth first: the store's Watch does not report a mark.
	{
		c := &ownWritesCluster{Cluster: fake.NewCluster(), subs: map[string][]chan struct{}{}}
		c.AddMachine(remediation.Machine{Name: "m1", NodeName: "m1"})
		ctx, cancel := context.WithCancel(context.Background())
		ch, _ := c.Watch(ctx, "m1")
		c.SetNeedsRemediation("m1", true)
		select {
		case <-ch:
			t.Fatal("test store: its watch reported the health checker's mark")
		case <-time.After(200 * time.Millisecond):
		}
		cancel()
	}
	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := &ownWritesCluster{Cluster: seedCluster(fake.NewCluster(), ms, ns), subs: map[string][]chan struct{}{}}
		return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), Admissions: c, World: clusterWorld{c.Cluster}}, nil
	}, "a MachineWatcher whose Watch reports only the store's own SaveState writes, never the health checker marking a Machine (Loop then never sees an unhealthy Machine before Resync: it does not poll a store that can watch), passed the kit's Contract")
}
