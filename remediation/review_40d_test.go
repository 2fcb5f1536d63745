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

// flakyWatchRecords is fake.Records (a RecordWatcher) whose first Watch
// fails, as a Kubernetes watch or informer does during an API server
// blip; every later Watch works.
type flakyWatchRecords struct {
	*fake.Records
	fails atomic.Int32
}

func (s *flakyWatchRecords) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("watch: connection refused (transient)")
	}
	return s.Records.Watch(ctx, name)
}

// flakyWatchHosts is fake.RebootHosts (a reboot.HostWatcher) whose first
// Watch fails (transient), every later one works.
type flakyWatchHosts struct {
	*fake.RebootHosts
	fails atomic.Int32
}

func (s *flakyWatchHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("watch hosts: connection refused (transient)")
	}
	return s.RebootHosts.Watch(ctx, name)
}

// TestReview40d_TransientMachineWatchFailurePollsForever: Loop's doc: a
// Machine is woken "at once if Machines is a MachineWatcher". Since
// 91cc111 a MachineWatcher whose Watch fails once (an API blip) falls
// back to the shared poller, whose channel never closes: the Runner only
// starts a watch again when it fails or closes, so the working watch is
// never tried again and the Machine is woken only every PollInterval
// (and the poller lists the whole store every interval, for ever: the
// cost the doc says a Watch spares). Before 91cc111 the Runner retried
// the failed watch after its back-off and got the real watch back. Here
// PollInterval is 1 h; the second Watch would work; a Machine whose
// record changes after the blip gets no pass in 2 s.
func TestReview40d_TransientMachineWatchFailurePollsForever(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	store := &flakyWatchRecords{Records: inv}
	store.fails.Store(1)
	machines, nodes := remediation.Records(store)
	rh := &remediation.RebootAPIHosts{Hosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}), Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 500*time.Millisecond) // first watch try, first passes, any retry

	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "changed"} }) // another writer changes its record
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed over a MachineWatcher that works again, but no pass in 2 s: its first Watch failed once, Loop fell back to the poller (PollInterval %v) for good and the Runner never retries the real watch", time.Hour)
	}
}

// TestReview40d_TransientHostWatchFailureLosesHostWakes: Loop's doc:
// "When Hosts is a *RebootHosts over a store that can watch
// (reboot.HostWatcher), it is also woken whenever its host's record
// changes: the reboot controller's evidence is acted on at once, not at
// the next poll." Since 91cc111 a host watch that fails to start (once,
// an API blip) is dropped (hch = nil) while the merged watch goes on: it
// does not fail and does not close, so nothing ever starts the host
// watch again (until the Machine moves to another host): the host's
// changes are seen only at the Machine's next RequeueAfter. Before
// 91cc111 the merged watch failed and the Runner retried it. Here
// PollInterval is 1 h; the host's second Watch would work; its record
// changes after the blip and db-1 gets no pass in 2 s.
func TestReview40d_TransientHostWatchFailureLosesHostWakes(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	hosts := &flakyWatchHosts{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true})}
	hosts.fails.Store(1)
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 500*time.Millisecond)

	if err := hosts.Mutate("bmh-1", func(h *reboot.Host) { h.Online = false }); err != nil {
		t.Fatal(err)
	}
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("bmh-1's record changed (host store watches again) but db-1 got no pass in 2 s: its host watch failed once to start, was dropped for good, and the merged watch never fails or closes so the Runner never starts it again")
	}
}
