package remediation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// hangOnHostWatch is fake.RebootHosts (a reboot.HostWatcher) whose Watch
// of the host named hang hangs for d before failing (that host's API
// shard partitioned: a SYN black hole); every other Watch works.
type hangOnHostWatch struct {
	*fake.RebootHosts
	hang  string
	d     time.Duration
	calls atomic.Int32 // Watch calls of hang
}

func (s *hangOnHostWatch) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if name == s.hang {
		s.calls.Add(1)
		select {
		case <-time.After(s.d):
		case <-ctx.Done():
		}
		return nil, errors.New("watch hosts: i/o timeout")
	}
	return s.RebootHosts.Watch(ctx, name)
}

// TestReview40f_HangingWatchOfNewHostMutesMachineWatch: 9747b24 moved the
// retried host watch onto its own goroutine "so a Watch that hangs does
// not stop the Machine's wakes", but the other place watchWithHost starts
// a host watch, when the Machine's wake finds HostOf's answer changed (a
// Machine provisioned onto a host, or moved: Loop's doc), still calls
// startHost -> watchHost synchronously inside the goroutine that forwards
// the Machine's wakes, and before it passes that very wake on. A Watch
// of the new host that hangs therefore mutes the Machine's working
// watch: the change that moved db-1, and every change after it, get no
// pass until the hung Watch returns. Here PollInterval is 1 h, db-1 moves
// from bmh-1 to bmh-2 whose Watch hangs for 8 s, and db-1's record
// (fake.Records, a working RecordWatcher) changes: no pass in 2 s.
func TestReview40f_HangingWatchOfNewHostMutesMachineWatch(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	hosts := &hangOnHostWatch{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}, reboot.Host{Name: "bmh-2", Online: true}),
		hang: "bmh-2", d: 8 * time.Second}
	var host atomic.Value
	host.Store("bmh-1")
	rh := &remediation.RebootHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return host.Load().(string), nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runCounting(t, ctx, r)
	time.Sleep(500 * time.Millisecond)
	count()
	time.Sleep(300 * time.Millisecond)
	if n := count(); n != 0 {
		t.Fatalf("precondition: db-1 is quiet (got %d passes)", n)
	}

	host.Store("bmh-2") // db-1 moved (re-provisioned) onto bmh-2
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "moved"} })
	if !waitPass(count, 2*time.Second) {
		if c := hosts.calls.Load(); c == 0 {
			t.Fatalf("precondition: bmh-2's Watch was never called")
		}
		t.Fatalf("db-1's own record changed over a working MachineWatcher, but no pass in 2 s: watchWithHost calls the new host's Watch (which hangs) inside the goroutine that forwards the Machine's wakes, before passing the wake on")
	}
	// And a later change too (the health checker's mark).
	count()
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "unhealthy"} })
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed again, but no pass in 2 s: the Machine's watch is muted while bmh-2's Watch hangs")
	}
}
