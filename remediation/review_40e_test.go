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

// hangingWatchRecords is fake.Records (a RecordWatcher) whose first Watch
// fails at once (connection refused) and whose second hangs for hang
// before failing (a SYN black hole during the same network partition);
// every later Watch works.
type hangingWatchRecords struct {
	*fake.Records
	calls atomic.Int32
	hang  time.Duration
}

func (s *hangingWatchRecords) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	switch s.calls.Add(1) {
	case 1:
		return nil, errors.New("watch: connection refused")
	case 2:
		select {
		case <-time.After(s.hang):
		case <-ctx.Done():
		}
		return nil, errors.New("watch: i/o timeout")
	}
	return s.Records.Watch(ctx, name)
}

// TestReview40e_HangingWatchRetryStopsPolling: e1fd5f6's withRetry
// promises "the watch try makes once it starts, and fallback's until
// then" (run.go: "Polled meanwhile, and the watch tried again with a
// back-off"). But withRetry calls try synchronously in the goroutine
// that forwards the poller's wakes: while a retried Watch call is in
// flight (a dial or an informer sync that hangs, which reboot.Runner
// itself guards against with firstWatchWait), the poller's wakes sit in
// its buffer and the Machine is not woken. Here PollInterval is 200 ms,
// the retry at 1 s hangs for 8 s, and db-1's record changes at 2 s: no
// pass in 2 s (ten poll intervals).
func TestReview40e_HangingWatchRetryStopsPolling(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	store := &hangingWatchRecords{Records: inv, hang: 8 * time.Second}
	machines, nodes := remediation.Records(store)
	rh := &remediation.RebootAPIHosts{Hosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}), Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: 200 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 500*time.Millisecond) // first watch fails, polling starts, the retry at 1 s hangs
	if c := store.calls.Load(); c != 2 {
		t.Fatalf("precondition: the retried Watch is in flight (Watch calls: %d)", c)
	}

	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "changed"} })
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed while its Machine watch was down and polled (PollInterval 200 ms), but no pass in 2 s: withRetry's goroutine is blocked in the retried Watch call and does not forward the poller's wakes")
	}
}

// hangingWatchHosts is fake.RebootHosts (a reboot.HostWatcher) whose
// first Watch fails at once and whose second hangs for hang before
// failing; every later Watch works.
type hangingWatchHosts struct {
	*fake.RebootHosts
	calls atomic.Int32
	hang  time.Duration
}

func (s *hangingWatchHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	switch s.calls.Add(1) {
	case 1:
		return nil, errors.New("watch hosts: connection refused")
	case 2:
		select {
		case <-time.After(s.hang):
		case <-ctx.Done():
		}
		return nil, errors.New("watch hosts: i/o timeout")
	}
	return s.RebootHosts.Watch(ctx, name)
}

// TestReview40e_HangingHostWatchRetryMutesMachineWatch: Loop's doc: a
// Machine is woken "at once if Machines is a MachineWatcher";
// watchWithHost's doc: "a host watch that cannot start leaves the
// Machine's watch alone while it is tried again with a back-off". Since
// e1fd5f6 the host watch is tried again (startHost) inside the goroutine
// that forwards the Machine's wakes: while that retried host Watch call
// hangs (the host store's API partitioned), the Machine store's working
// watch is muted too: the health checker marks db-1 unhealthy and db-1
// gets no pass. Before e1fd5f6 a host watch that failed was not retried
// and the Machine's watch went on. Here PollInterval is 1 h, the host
// watch's retry at 1 s hangs for 8 s, and db-1's record (fake.Records, a
// working RecordWatcher) changes at 2 s: no pass in 2 s.
func TestReview40e_HangingHostWatchRetryMutesMachineWatch(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	hosts := &hangingWatchHosts{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}), hang: 8 * time.Second}
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 500*time.Millisecond) // host watch fails, its retry at 1 s hangs
	if c := hosts.calls.Load(); c != 2 {
		t.Fatalf("precondition: the retried host Watch is in flight (Watch calls: %d)", c)
	}

	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "changed"} }) // the health checker's mark
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's own record changed over a working MachineWatcher, but no pass in 2 s: the host watch's retry hangs inside watchWithHost's goroutine, which therefore forwards no Machine wake")
	}
}
