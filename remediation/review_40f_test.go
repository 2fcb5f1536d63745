package remediation_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
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
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return host.Load().(string), nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 500*time.Millisecond, 300*time.Millisecond)

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

// scriptedHostWatch is fake.RebootHosts whose Watch of bmh-1 fails the
// first time and hangs after (until its context ends, and the dial takes
// 200 ms more to unwind); whose Watch of bmh-2 does the same.
type scriptedHostWatch struct {
	*fake.RebootHosts
	calls [3]atomic.Int32
}

func (s *scriptedHostWatch) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	i := 1
	if name == "bmh-2" {
		i = 2
	}
	if s.calls[i].Add(1) == 1 {
		return nil, errors.New("watch hosts: connection refused")
	}
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond) // the dial unwinds
	return nil, ctx.Err()
}

// TestReview40f_WatchRetryGoroutineLeaks: 9747b24's watchWithHost starts
// each host watch retry on a goroutine that sends its result to a buffer
// of one, read only by the forwarding goroutine. When the Machine moves
// while one retry is in flight and the new host's watch fails too, a
// second retry goroutine starts while the first is still in flight; when
// the watch then ends (ctx done: the Runner restarts or stops it), both
// return, one fills the buffer, and the other blocks on its send for
// ever. Every such watch (restarted by the Runner after each failure of
// a flapping network) leaks a goroutine and its closure.
func TestReview40f_WatchRetryGoroutineLeaks(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	hosts := &scriptedHostWatch{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}, reboot.Host{Name: "bmh-2", Online: true})}
	var host atomic.Value
	host.Store("bmh-1")
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return host.Load().(string), nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	l := r.Loop(func(context.Context) ([]string, error) { return []string{"db-1"}, nil })
	before := countBlockedSends()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := l.Watch(ctx, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ch {
		}
	}()
	time.Sleep(1300 * time.Millisecond) // bmh-1's watch failed; its retry at 1 s hangs
	if hosts.calls[1].Load() != 2 {
		t.Fatalf("precondition: bmh-1's retried Watch in flight (calls %d)", hosts.calls[1].Load())
	}
	host.Store("bmh-2")
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "moved"} })
	time.Sleep(1300 * time.Millisecond) // bmh-2's watch failed; its retry at 1 s hangs
	if hosts.calls[2].Load() != 2 {
		t.Fatalf("precondition: bmh-2's retried Watch in flight (calls %d)", hosts.calls[2].Load())
	}
	cancel()
	time.Sleep(time.Second) // both Watch calls return (200 ms after the cancel)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if countBlockedSends() <= before {
			return
		}
	}
	t.Fatalf("2 s after the watch's context ended, %d goroutines of watchWithHost are blocked on a send nobody will read (before: %d):\n%s",
		countBlockedSends(), before, stacksWith("remediation.watchWithHost"))
}

func allStacks() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Split(string(buf[:n]), "\n\n")
}

// countBlockedSends counts the goroutines of watchWithHost blocked on a
// channel send (other tests' goroutines still winding down are not).
func countBlockedSends() int {
	c := 0
	for _, g := range allStacks() {
		if strings.Contains(g, "[chan send") && strings.Contains(g, "remediation.watchWithHost") {
			c++
		}
	}
	return c
}

func stacksWith(s string) string {
	var out []string
	for _, g := range allStacks() {
		if strings.Contains(g, s) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// TestReview40f_HungHostOfMutesMachineWatchForGood: watchWithHost asks
// HostOf again on every Machine wake, synchronously in the goroutine that
// forwards the wakes and under the watch's own context, which has no
// deadline (it ends only when the Runner stops watching the key). Passes
// are bounded by PassTimeout and the poller bounds its reads (version:
// PollInterval), but this call is not: one HostOf request lost in a
// network black hole (no answer, no RST) blocks the watch until the
// kernel gives up on the connection, or for ever for a store that waits
// on its context. Meanwhile the Machine's working watch is muted, and as
// the channel is neither fed nor closed the Runner does not start it
// again: the health checker's marks wait for RequeueAfter. Here one
// HostOf call (the watch's, on db-1's first change) never returns while
// every later call works; PollInterval is 1 h; neither that change nor a
// later one gets a pass in 2 s.
func TestReview40f_HungHostOfMutesMachineWatchForGood(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	var armed atomic.Bool
	var hung atomic.Int32
	rh := &remediation.RebootAPIHosts{Hosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}), Now: time.Now,
		HostOf: func(ctx context.Context, _ string) (string, error) {
			if armed.CompareAndSwap(true, false) {
				hung.Add(1)
				<-ctx.Done() // the request is lost; only the caller's context ends it
				return "", ctx.Err()
			}
			return "bmh-1", nil
		}}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 500*time.Millisecond, 300*time.Millisecond)

	armed.Store(true)
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "first"} })
	ok := waitPass(count, 2*time.Second)
	if hung.Load() != 1 {
		t.Fatalf("precondition: one HostOf call hangs (got %d)", hung.Load())
	}
	if !ok {
		t.Errorf("db-1's record changed over a working MachineWatcher, but no pass in 2 s: watchWithHost's goroutine is blocked in an unbounded HostOf call")
	}
	count()
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "unhealthy"} }) // every HostOf call works now
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed again (HostOf answers again), but no pass in 2 s: the Machine's watch stays muted behind the one hung HostOf call, and the Runner never restarts it")
	}
}
