package remediation_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_NounsRewriteNames: Config.Nouns puts "the caller's nouns"
// into the messages, but it rewrites words by a regular expression over
// the whole message, names included: \b matches at '-', so a machine
// named "node-3" in a group named "machine-room" (everyday inventory
// names) is reported as "server-3" of "server-room". The storm guard's
// refusal, persisted in State.Message for the operator, then names a
// server that does not exist.
func TestReview40_NounsRewriteNames(t *testing.T) {
	fleet := []remediation.FleetMachine{
		{Name: "node-1", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-2", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-3", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-4", Cluster: "machine-room"},
	}
	ok, why := remediation.MayStart(fleet, "node-3", remediation.MaxCount(1))
	if ok {
		t.Fatalf("the storm guard admitted node-3: %s", why)
	}
	cfg := remediation.Config{Nouns: remediation.Nouns{Machine: "server", Node: "server", Group: "rack"}}
	o := remediation.Observed{
		Machine:  remediation.Machine{Name: "node-3", NeedsRemediation: true, Cluster: "machine-room"},
		MayStart: false, GuardReason: why,
	}
	d := cfg.Decide(o, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for what, msg := range map[string]string{"State.Message": d.State.Message, "Reason": d.Reason} {
		if msg == "" {
			continue
		}
		t.Logf("%s: %q", what, msg)
		if strings.Contains(why, "machine-room") && !strings.Contains(msg, "machine-room") {
			t.Errorf("%s %q: the group's name machine-room was rewritten (the guard said %q)", what, msg, why)
		}
	}
	// The guard's own reason for a machine it does not know names it.
	_, why = remediation.MayStart(fleet, "node-9", remediation.MaxCount(1))
	o.Machine.Name, o.GuardReason = "node-9", why
	d = cfg.Decide(o, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if !strings.Contains(d.State.Message+d.Reason, "node-9") {
		t.Errorf("the machine's name node-9 was rewritten: message %q, reason %q (the guard said %q)", d.State.Message, d.Reason, why)
	}
}

// TestReview40_UnhealthyRecordWaitsForResync: remediation's doc (step 5)
// says to look again "whenever the Machine, Node or host changes", and the
// README runs remediation.Reconciler.Loop in a reboot.Runner. But the Loop
// watches only the host's record: a server of a single-record inventory
// (RecordStore has no Watch) that its health check marks Unhealthy after
// its first pass (a healthy machine asks for no requeue) waits for the
// Runner's Resync (10 minutes by default) before anything starts, and
// nothing in Loop's, Records' or the Runner's doc says to wake it
// (Runner.Add). A silent ten-minute stall before a failed host is fenced.
func TestReview40_UnhealthyRecordWaitsForResync(t *testing.T) {
	inv := &recordInventory{rs: fake.NewRecords()}
	inv.set("db-1", func(r *remediation.Record) { *r = remediation.Record{Name: "db-1", Group: "db", Ready: true} })
	inv.set("db-2", func(r *remediation.Record) { *r = remediation.Record{Name: "db-2", Group: "db", Ready: true} })
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true}, reboot.Host{Name: "db-2", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	machines, nodes := remediation.Records(inv)
	var passes atomic.Int32
	rem := &remediation.Reconciler{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, Power: pc, StaleReads: 100 * time.Millisecond,
			HostOf: func(_ context.Context, m string) (string, error) { return m, nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{OutOfService: true, PollInterval: 50 * time.Millisecond, Timeout: time.Minute}}
	names := func(context.Context) ([]string, error) { return []string{"db-1", "db-2"}, nil }
	loop := rem.Loop(names)
	inner := loop.Reconcile
	loop.Reconcile = func(ctx context.Context, k string) (reboot.Next, error) {
		if k == "db-1" {
			passes.Add(1)
		}
		return inner(ctx, k)
	}
	r := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(names), loop}} // the defaults, as the README
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "db-1's first pass")
	time.Sleep(200 * time.Millisecond)

	inv.set("db-1", func(r *remediation.Record) { r.Unhealthy, r.Ready = true, false }) // the health check's verdict
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := inv.Get(ctx, "db-1")
		require.NoError(t, err)
		if remediation.InFlight(rec.State.Phase) || rec.OutOfService || !hw.HardwareOn() {
			return
		}
		require.True(t, time.Now().Before(deadline),
			"db-1 marked unhealthy 10 s ago: no remediation started (state %+v, db-1's passes %d, truth %v): it waits for the Runner's 10-minute resync",
			rec.State, passes.Load(), hw.Truth())
		time.Sleep(20 * time.Millisecond)
	}
}

// slowRead is a MachineStore whose read of a Machine already in flight
// takes longer than a lease's remainder (a slow store, or the process
// paused in it).
type slowRead struct{ remediation.MachineStore }

func (s slowRead) Get(ctx context.Context, name string) (remediation.MachineRecord, error) {
	rec, err := s.MachineStore.Get(ctx, name)
	if err == nil && remediation.InFlight(rec.State.Phase) {
		time.Sleep(150 * time.Millisecond)
	}
	return rec, err
}

// shortLease is a Guard whose every Hold bounds the call by 50 ms of lease.
type shortLease struct{}

func (shortLease) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	return c, cancel, nil
}

// TestReview40_RemediationWritesAfterGuardDeadline: reboot.Guard's doc and
// its helper say the reconcilers check the Guard's context "once more right
// before the call: a process paused in between finds it past its
// deadline". remediation.Reconciler's host and Node steps check it, then
// read the Machine again (current) and write without looking at the
// context again: a pass paused in that read beyond its lease adds the
// reboot request (and deletes or taints the Node) after another leader
// may have taken over. Stores that do not check ctx before they write
// (fake.RebootHosts, examples/ownstore's inventory, any in-memory store;
// nothing in HostStore's doc or the kits asks them to) carry it out.
// Ground truth: the host's record.
func TestReview40_RemediationWritesAfterGuardDeadline(t *testing.T) {
	ctx := context.Background()
	cluster := fake.NewCluster()
	cluster.AddMachine(remediation.Machine{Name: "m0", UID: "uid-m0", NodeName: "n0", NeedsRemediation: true})
	cluster.PutNode(remediation.Node{Name: "n0", Ready: false})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h0", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rem := &remediation.Reconciler{Machines: slowRead{cluster}, Nodes: cluster.Nodes(), Admissions: cluster, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, Power: pc,
			HostOf: func(context.Context, string) (string, error) { return "h0", nil }},
		Config: remediation.Config{PollInterval: time.Hour, Timeout: time.Minute}, Guard: shortLease{}}
	var err error
	for i := 0; i < 5; i++ {
		var res remediation.Result
		res, err = rem.Reconcile(ctx, "m0")
		if res.Decision.AddRebootAnnotation || err != nil {
			break
		}
	}
	h, gerr := hosts.Get(ctx, "h0")
	require.NoError(t, gerr)
	for k := range h.Annotations {
		if reboot.IsRebootAnnotation(k) {
			t.Fatalf("the reboot request %s was written after the Guard's context had ended (pass error: %v)", k, err)
		}
	}
	t.Logf("pass error: %v; annotations %v", err, h.Annotations)
}
