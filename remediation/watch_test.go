package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// woken waits for a value on ch (a wake-up) for at most 5 s.
func woken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "%s: the watch closed", what)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no wake-up", what)
	}
}

// TestLoopWatchesMachines (review 40, TestReview40_UnhealthyRecordWaitsForResync):
// Loop's Watch wakes a Machine when its record changes: at once through a
// MachineWatcher (fake.Records via Records, fake.Cluster, also on its
// Node's change), by polling every PollInterval otherwise, and on its
// host's change, all merged into one channel.
func TestLoopWatchesMachines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true})
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(_ context.Context, m string) (string, error) { return m, nil }}
	slow := remediation.Config{PollInterval: time.Hour} // no poll could explain a wake-up

	t.Run("RecordWatcher", func(t *testing.T) {
		inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
		machines, nodes := remediation.Records(inv)
		_, ok := machines.(remediation.MachineWatcher)
		require.True(t, ok, "Records over a RecordWatcher is a MachineWatcher")
		r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Config: slow}
		ch, err := r.Loop(nil).Watch(ctx, "db-1")
		require.NoError(t, err)
		inv.Set("db-1", func(r *remediation.Record) { r.Unhealthy = true })
		woken(t, ch, "record marked unhealthy")
		require.NoError(t, hosts.Mutate("db-1", func(h *reboot.Host) { h.Online = false }))
		woken(t, ch, "host changed")
	})
	t.Run("Cluster", func(t *testing.T) {
		c := fake.NewCluster()
		c.AddMachine(remediation.Machine{Name: "db-1", NodeName: "n1"})
		c.PutNode(remediation.Node{Name: "n1", Ready: true})
		r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Hosts: rh, Config: slow}
		ch, err := r.Loop(nil).Watch(ctx, "db-1")
		require.NoError(t, err)
		c.SetNeedsRemediation("db-1", true)
		woken(t, ch, "machine marked")
		c.SetNodeReady("n1", false)
		woken(t, ch, "node not ready")
	})
	t.Run("Poll", func(t *testing.T) {
		inv := &recordInventory{rs: fake.NewRecords()}
		inv.set("db-1", func(r *remediation.Record) { *r = remediation.Record{Name: "db-1", Ready: true} })
		machines, nodes := remediation.Records(inv)
		_, ok := machines.(remediation.MachineWatcher)
		require.False(t, ok, "a RecordStore without Watch")
		r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh,
			Config: remediation.Config{PollInterval: 20 * time.Millisecond}}
		wctx, wcancel := context.WithCancel(ctx)
		ch, err := r.Loop(nil).Watch(wctx, "db-1")
		require.NoError(t, err)
		inv.set("db-1", func(r *remediation.Record) { r.Unhealthy = true })
		woken(t, ch, "record marked unhealthy (polled)")
		wcancel()
		for range ch { // closed once its context ends
		}
	})
}
