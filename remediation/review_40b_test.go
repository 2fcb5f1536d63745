package remediation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40b_HostWatchFollowsHostOf: Loop's doc says a Machine is
// woken "whenever its host's record changes: the reboot controller's
// evidence is acted on at once". The host is resolved with HostOf once,
// when the merged watch starts, and the watch never restarts while the
// Machine's own watch runs: a Machine that had no host then (HostOf ""
// until it is provisioned) or whose mapping changed is never woken by its
// host again; its host's evidence waits for the next poll.
func TestReview40b_HostWatchFollowsHostOf(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true})
	var mu sync.Mutex
	mapping := map[string]string{} // db-1 has no host yet
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(_ context.Context, m string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			return mapping[m], nil
		}}
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh,
		Config: remediation.Config{PollInterval: time.Hour}}
	ch, err := r.Loop(nil).Watch(ctx, "db-1")
	require.NoError(t, err)

	// The Machine is provisioned onto bmh-1: its record changes (woken).
	mu.Lock()
	mapping["db-1"] = "bmh-1"
	mu.Unlock()
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"host": "bmh-1"} })
	woken(t, ch, "record changed")

	// The reboot controller writes on bmh-1: the Machine must be woken.
	require.NoError(t, hosts.Mutate("bmh-1", func(h *reboot.Host) { h.Online = false }))
	select {
	case _, ok := <-ch:
		if !ok {
			return // the watch ended: the Runner starts it again, resolving the host anew
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the Machine's host (bmh-1 since its provisioning) changed, but the Machine was not woken: the merged watch still watches the host HostOf named when it started (none)")
	}
}

// countingInventory is recordInventory counting its reads.
type countingInventory struct {
	*recordInventory
	mu          sync.Mutex
	gets, lists int
}

func (c *countingInventory) Get(ctx context.Context, name string) (remediation.Record, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.recordInventory.Get(ctx, name)
}

func (c *countingInventory) List(ctx context.Context) ([]remediation.Record, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.recordInventory.List(ctx)
}

// TestReview40b_PollReadsEveryMachineEveryInterval: over a store without
// Watch, Loop's Watch (which the Runner starts for every key it lists)
// starts one goroutine and ticker per Machine, each reading its Machine
// every PollInterval: an idle, healthy fleet of 10,000 records costs the
// operator's inventory 2,000 reads a second (default 5 s) for ever, where
// one List per PollInterval (MachineStore.List, which the storm guard
// already uses) would see the same changes. Here 1,000 healthy records
// at a 100 ms interval: the Loop reads each about ten times a second.
func TestReview40b_PollReadsEveryMachineEveryInterval(t *testing.T) {
	const n = 1000
	inv := &countingInventory{recordInventory: &recordInventory{rs: fake.NewRecords()}}
	var hs []reboot.Host
	var names []string
	for i := range n {
		name := fmt.Sprintf("db-%04d", i)
		names = append(names, name)
		inv.set(name, func(r *remediation.Record) { *r = remediation.Record{Name: name, Group: "db", Ready: true} })
		hs = append(hs, reboot.Host{Name: name, Online: true})
	}
	hosts := fake.NewRebootHosts(hs...)
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(_ context.Context, m string) (string, error) { return m, nil }}
	machines, nodes := remediation.Records(inv)
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh,
		Config: remediation.Config{PollInterval: 100 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop := r.Loop(nil)
	var chs []<-chan struct{}
	for _, name := range names { // what the Runner does for every key
		ch, err := loop.Watch(ctx, name)
		require.NoError(t, err)
		chs = append(chs, ch)
	}
	inv.mu.Lock()
	inv.gets, inv.lists = 0, 0
	inv.mu.Unlock()
	time.Sleep(time.Second) // nothing changes
	inv.mu.Lock()
	gets, lists := inv.gets, inv.lists
	inv.mu.Unlock()
	cancel()
	for _, ch := range chs {
		for range ch {
		}
	}
	if gets >= n {
		t.Fatalf("an idle fleet of %d healthy records without Watch: the Loop read the store %d times (and listed it %d times) in one second at PollInterval 100 ms: one read per Machine per interval (at 10,000 Machines and 5 s: 2,000 reads a second for ever)", n, gets, lists)
	}
}
