package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40at_FreshOffOfflineSinceReleasesLiveHostStillOff (passing
// coverage): RebootAPIHosts's synthesized RebootPending reads
// Status.OfflineSince as "a power-off for its owner since"
// (reboothosts.go:209-228: "the controller writes OfflineSince only when it
// powers an On host off"); 75e4656 makes idle write OfflineSince also for a
// host already off when Online=false comes (freshOff). Here the request's
// host, off because its BMC refuses the power-on (fault kept on), gets
// OfflineSince after LastPoweredOn during an owner's release-and-back blip
// (Online false + Unprovisioned, then back). The live Machine's admission
// must be kept throughout, and no second host go off under MaxCount(1).
// Ground truth: h1 off throughout, h2 never off. (Passes on 75e4656: the
// admission is kept.)
func TestReview40at_FreshOffOfflineSinceReleasesLiveHostStillOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := fake.NewCluster()
	for _, n := range []string{"m1", "m2"} {
		cluster.AddMachine(remediation.Machine{Name: n, UID: "uid-" + n, NodeName: n, Cluster: "c"})
		cluster.PutNode(remediation.Node{Name: n, UID: "n-" + n, Ready: true})
	}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true})
	hw := map[string]*fake.Power{
		"h1": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
		"h2": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
	}
	pw := func(h string) (power.Controller, error) { return hw[h], nil }
	hostOf := map[string]string{"m1": "h1", "m2": "h2"}
	rem := &remediation.Reconciler{Machines: cluster, Nodes: cluster.Nodes(), Admissions: cluster, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, Power: pw, StaleReads: 100 * time.Millisecond, OwnerOnline: true,
			HostOf: func(_ context.Context, m string) (string, error) { return hostOf[m], nil }},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second}}
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pw,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(func(context.Context) ([]string, error) { return []string{"h1", "h2"}, nil })}}
	go func() { _ = runner.Run(rctx) }()
	pass := func(m string) {
		_, err := rem.Reconcile(ctx, m)
		rec, _ := cluster.Get(ctx, m)
		t.Logf("%s: err=%v phase=%s msg=%q", m, err, rec.State.Phase, rec.State.Message)
	}

	cluster.SetNodeReady("m1", false)
	cluster.SetNeedsRemediation("m1", true)
	pass("m1")
	require.Eventually(t, func() bool { return !hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 powered off")
	hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	cluster.SetNeedsRemediation("m1", false)
	for i := 0; i < 10; i++ {
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	if a, _ := cluster.GetAdmissions(ctx); !a.Has("m1") {
		t.Fatalf("precondition: m1 keeps its admission while h1 is off for its request")
	}
	h1, _ := hosts.Get(ctx, "h1")
	t.Logf("h1 before the blip: pending=%v status=%+v", h1.Status.Pending(), h1.Status)

	// The owner releases h1 (Online false, unprovisioned) and takes it
	// back a second later: a blip.
	from := time.Now()
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) { h.Online, h.Unprovisioned = false, true }))
	for i := 0; i < 20; i++ {
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	h1, _ = hosts.Get(ctx, "h1")
	a0, _ := cluster.GetAdmissions(ctx)
	t.Logf("h1 during the blip: admissions=%v pending=%v status=%+v", a0.Machines, h1.Status.Pending(), h1.Status)
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) { h.Online, h.Unprovisioned = true, false }))
	time.Sleep(300 * time.Millisecond)

	a1, _ := cluster.GetAdmissions(ctx)
	t.Logf("after the blip: admissions=%v", a1.Machines)
	cluster.SetNodeReady("m1", true) // the storm guard counts unhealthy Machines too: only the hosts off count here
	cluster.SetNodeReady("m2", false)
	cluster.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		pass("m2")
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if hw["h1"].OffThroughout(from, to) && hw["h2"].WasOffDuring(from, to) {
		a, _ := cluster.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off since m1's request, its power-on refused, never on since: truth %v) and h2 (truth %v) both off at once by remediation requests; admissions now %v",
			hw["h1"].Truth(), hw["h2"].Truth(), a.Machines)
	}
}
