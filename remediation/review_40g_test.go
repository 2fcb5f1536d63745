package remediation_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40g_MoveDuringSlowHostOfKeepsOldHost: Loop's doc: "The host is
// the one HostOf names, asked again whenever the Machine's record
// changes (a Machine provisioned onto a host, or moved, is then woken by
// its new host)". Since 0314746 watchWithHost asks HostOf on its own
// goroutine and, while that call is in flight (resolving), a further
// Machine wake is passed on without asking again. A HostOf that reads its
// mapping and then takes longer than resolveWait (50 ms) to answer (a
// CMDB 300 ms away) answers for the mapping before the move; the move's
// own wake, arriving meanwhile, asks nothing; the stale answer is applied
// (no change) and the watch stays on the old host. Here db-1 changes
// (first wake), then moves from bmh-1 to bmh-2 100 ms later: once the
// dust settles, bmh-2's record changes (the reboot controller's evidence)
// and db-1 is not woken; only bmh-1's changes would wake it.
func TestReview40g_MoveDuringSlowHostOfKeepsOldHost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}, reboot.Host{Name: "bmh-2", Online: true})
	var mu sync.Mutex
	mapping := map[string]string{"db-1": "bmh-1"}
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(ctx context.Context, m string) (string, error) {
			mu.Lock()
			h := mapping[m]
			mu.Unlock()
			select { // the answer travels back from a CMDB 300 ms away
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return h, nil
		}}
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh,
		Config: remediation.Config{PollInterval: time.Hour}}
	ch, err := r.Loop(nil).Watch(ctx, "db-1")
	require.NoError(t, err)

	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "first"} })
	woken(t, ch, "first change")
	time.Sleep(50 * time.Millisecond) // the HostOf asked for the first change is still in flight
	mu.Lock()
	mapping["db-1"] = "bmh-2" // db-1 re-provisioned onto bmh-2
	mu.Unlock()
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "moved"} })
	woken(t, ch, "the move")
	time.Sleep(1500 * time.Millisecond) // every HostOf asked has answered (300 ms each), any new host watch is up
	for drained := false; !drained; {
		select {
		case _, ok := <-ch:
			if !ok {
				return // the watch ended: the Runner starts it again, resolving the host anew
			}
		default:
			drained = true
		}
	}

	// The reboot controller writes on bmh-2, db-1's host for 1.5 s.
	require.NoError(t, hosts.Mutate("bmh-2", func(h *reboot.Host) { h.Online = false }))
	select {
	case _, ok := <-ch:
		if !ok {
			return
		}
	case <-time.After(3 * time.Second):
		t.Fatal("db-1 moved to bmh-2 and bmh-2's record changed, but db-1 was not woken: the move's wake came while an earlier HostOf was in flight, was passed on without asking HostOf again, and that earlier (stale) answer left the watch on bmh-1")
	}
}

// TestReview40g_HungFirstHostOfMutesMachineWatch: 0314746 bounded the
// HostOf that a Machine's wake asks (30 s, own goroutine: "a store that
// does not answer must not silence the Machine's wakes"), but the first
// HostOf of the watch, at its start (and at every restart after a failed
// resolution: "the Runner then starts the watch again"), is still called
// synchronously under the watch's own context, which has no deadline:
// one request lost in a black hole blocks Loop.Watch for good. The
// Machine's own watch (already started) is read by nobody, and the
// Runner, whose watch goroutine is stuck in the call, never starts it
// again. Here the first HostOf (the watch's) never returns (whatever its
// deadline), every other call works, PollInterval is 1 h: db-1's record
// changes over a working MachineWatcher and gets no pass in 2 s.
func TestReview40g_HungFirstHostOfMutesMachineWatch(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	var hung atomic.Int32
	rh := &remediation.RebootAPIHosts{Hosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}), Now: time.Now,
		HostOf: func(ctx context.Context, _ string) (string, error) {
			if hung.CompareAndSwap(0, 1) { // the first call: the watch's, at its start (the first pass comes 1 s later)
				<-ctx.Done() // the request is lost; only the caller's context ends it
				return "", ctx.Err()
			}
			return "bmh-1", nil
		}}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 300*time.Millisecond) // the first pass ran (firstWatchWait)
	if hung.Load() != 1 {
		t.Fatalf("precondition: the watch's first HostOf hangs")
	}
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "unhealthy"} }) // the health checker's mark
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed over a working MachineWatcher, but no pass in 2 s: watchWithHost's first HostOf (watch.go:71) is unbounded and synchronous, so Loop.Watch never returns and the Runner never reads nor restarts the Machine's watch")
	}
}

// firstWatchHangs is fake.RebootHosts whose first Watch hangs until its
// context ends (an informer that never syncs, a host API black-holed);
// later calls work.
type firstWatchHangs struct {
	*fake.RebootHosts
	calls atomic.Int32
}

func (s *firstWatchHangs) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, errors.New("watch hosts: " + ctx.Err().Error())
	}
	return s.RebootHosts.Watch(ctx, name)
}

// TestReview40g_HungFirstHostWatchMutesMachineWatch: 9747b24 and 0314746
// moved the retried host watch and a moved Machine's new host watch onto
// their own goroutines ("a Watch that hangs must not stop the Machine's
// wakes"), but the first host watch, at the watch's start
// (startHost(h), watch.go:76), is still called synchronously under a
// context without deadline: a host Watch that hangs (the Runner's own doc
// names it: "an informer that never syncs") keeps Loop.Watch from
// returning, so the Machine's working watch is never read and the Runner
// never starts it again. Here the first host Watch hangs, every later one
// works, PollInterval is 1 h: db-1's record changes and gets no pass in
// 2 s.
func TestReview40g_HungFirstHostWatchMutesMachineWatch(t *testing.T) {
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(inv)
	hosts := &firstWatchHangs{RebootHosts: fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true})}
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: fake.NewCluster(), Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 300*time.Millisecond)
	if c := hosts.calls.Load(); c < 1 {
		t.Fatalf("precondition: the first host Watch was called (calls %d)", c)
	}
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"note": "unhealthy"} })
	if !waitPass(count, 2*time.Second) {
		t.Fatalf("db-1's record changed over a working MachineWatcher, but no pass in 2 s: watchWithHost starts the first host watch synchronously (watch.go:76), so Loop.Watch hangs with it and the Machine's watch is never read")
	}
}

// TestReview40g_MachineMovedMidRemediationLeavesOldHostOff: Loop's doc
// supports a Machine whose host changes ("a Machine provisioned onto a
// host, or moved, is then woken by its new host"), and doc.go promises
// "Every end state (done, failed, cancelled, escalated) removes its
// reboot annotation (no host is left off)". But the remediation does not
// persist which host it asked to reboot (State has no host): every pass,
// and every removal (RebootHosts.RemoveRebootAnnotation,
// reboothosts.go:118), asks HostOf anew. A Machine whose mapping changes
// while its first host is held off (a technician maps db-1's record to a
// spare chassis) leaves the old host's request behind: the reboot
// controller holds bmh-1 off for ever, owned by no remediation. Ground
// truth: bmh-1's hardware is still off, with the remediation's annotation,
// after the remediation ended.
func TestReview40g_MachineMovedMidRemediationLeavesOldHostOff(t *testing.T) {
	t.Parallel()
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}, reboot.Host{Name: "bmh-2", Online: true})
	hw := map[string]*fake.Power{
		"bmh-1": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
		"bmh-2": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
	}
	pc := func(h string) (power.Controller, error) { return hw[h], nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	var host atomic.Value
	host.Store("bmh-1")
	machines, nodes := remediation.Records(inv)
	rem := &remediation.Reconciler{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
			HostOf: func(context.Context, string) (string, error) { return host.Load().(string), nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{OutOfService: true, PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second}}
	r := &reboot.Runner{Loops: []reboot.Loop{
		rb.Loop(func(context.Context) ([]string, error) { return []string{"bmh-1", "bmh-2"}, nil }),
		rem.Loop(func(context.Context) ([]string, error) { return []string{"db-1"}, nil })}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()

	inv.Set("db-1", func(r *remediation.Record) { r.Unhealthy, r.Ready = true, false })
	require.Eventually(t, func() bool { return !hw["bmh-1"].HardwareOn() }, 20*time.Second, 10*time.Millisecond,
		"precondition: the remediation powers bmh-1 off (truth %v)", hw["bmh-1"].Truth())
	host.Store("bmh-2") // db-1's record now names the spare chassis
	inv.Set("db-1", func(r *remediation.Record) { r.Annotations = map[string]string{"chassis": "bmh-2"} })

	// Let the remediation run to an end state on bmh-2 (the node comes
	// back once asked for).
	deadline := time.Now().Add(40 * time.Second)
	for {
		rec, err := inv.Get(ctx, "db-1")
		require.NoError(t, err)
		if rec.State.Phase == remediation.PhaseWaitingForNode && !rec.Ready {
			inv.Set("db-1", func(r *remediation.Record) { r.Ready = true })
		}
		if (rec.State.Phase == remediation.PhaseDone || rec.State.Phase == remediation.PhaseFailed) && !rec.OutOfService {
			t.Logf("ended: %+v", rec.State)
			break
		}
		require.True(t, time.Now().Before(deadline), "precondition: the remediation ends (record %+v)", rec)
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // the reboot controller acts on what is left
	h1, err := hosts.Get(ctx, "bmh-1")
	require.NoError(t, err)
	_, held := h1.Annotations[remediation.RebootAnnotation]
	if held || !hw["bmh-1"].HardwareOn() {
		t.Fatalf("db-1's remediation ended, but bmh-1, the host it asked to reboot before db-1 moved, is still held off (annotation %v, hardware on %v): nothing removes the request, as every removal asks HostOf, which names bmh-2 now; truth %v",
			h1.Annotations, hw["bmh-1"].HardwareOn(), hw["bmh-1"].Truth())
	}
}

// TestReview40g_MachineDeletedMidRemediationLeavesHostOff: doc.go: "Every
// end state ... removes its reboot annotation (no host is left off)"; the
// REVIEW brief: after a remediation ends, nothing of it may stay off. A
// Machine deleted while its remediation holds its host off (its owner
// scales down, an operator removes the record) ends the remediation
// another way: Reconcile's ErrNotFound branch (reconciler.go:147) only
// releases the admission, and Loop then leaves the Machine alone; the
// reboot request the remediation wrote stays on the host, owned by no
// remediation, and the reboot controller holds the host off for ever.
// Ground truth: h1's hardware still off, with the request, 5 s after the
// Machine was deleted (HostOf still answers for it).
func TestReview40g_MachineDeletedMidRemediationLeavesHostOff(t *testing.T) {
	t.Parallel()
	cluster := fake.NewCluster()
	cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", HasControllerOwner: true})
	cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c", HasControllerOwner: true})
	cluster.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rem := &remediation.Reconciler{Machines: cluster, Nodes: cluster.Nodes(), Admissions: cluster, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 10 * time.Second}}
	r := &reboot.Runner{Loops: []reboot.Loop{
		rb.Loop(func(context.Context) ([]string, error) { return []string{"h1"}, nil }),
		rem.Loop(func(context.Context) ([]string, error) { return []string{"m1", "m2"}, nil })}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()

	cluster.SetNodeReady("m1", false)
	cluster.SetNeedsRemediation("m1", true)
	require.Eventually(t, func() bool { return !hw.HardwareOn() }, 20*time.Second, 10*time.Millisecond,
		"precondition: the remediation powers h1 off (truth %v)", hw.Truth())
	require.NoError(t, cluster.Delete(ctx, "m1")) // its MachineSet scales down
	time.Sleep(5 * time.Second)
	a, err := cluster.GetAdmissions(ctx)
	require.NoError(t, err)
	if a.Has("m1") {
		t.Fatalf("precondition: the deleted Machine's admission is released (%v)", a.Machines)
	}
	h1, err := hosts.Get(ctx, "h1")
	require.NoError(t, err)
	if _, held := h1.Annotations[remediation.RebootAnnotation]; held || !hw.HardwareOn() {
		t.Fatalf("m1 was deleted mid-remediation and its admission released 5 s ago, but h1 is still held off by its reboot request (annotations %v, hardware on %v): the ErrNotFound pass releases the admission only; truth %v",
			h1.Annotations, hw.HardwareOn(), hw.Truth())
	}
}
