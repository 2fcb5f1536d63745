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

// TestReview40p_NoPowerOfflineBlipReleasesLiveHostStillOff: the doc
// (doc.go "one Online false reading does not release a live Machine's host
// whose reboot is still pending"; RebootAPIHosts.OwnerOnline) promises that
// an owner's Online false-and-back blip does not let a host go while its
// power-on for the request was never read On. That rule (the synthesized
// RebootPending in reboothosts.go) lives only inside `if r.Power != nil`:
// without Power, kube.NewRemediationReconciler's default wiring, a live
// Machine's host whose BMC refuses the power-on (ground truth: off since
// the request) is released by one Online false reading, and a second host
// is powered off under MaxCount(1). Same scenario as
// TestReview40n_OfflineBlipReleasesHostStillOffForRequest, without Power
// on the remediation side.
func TestReview40p_NoPowerOfflineBlipReleasesLiveHostStillOff(t *testing.T) {
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
		// No Power: kube.NewRemediationReconciler's default.
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, StaleReads: 100 * time.Millisecond, OwnerOnline: true,
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
	for i := 0; i < 5; i++ {
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	if a, _ := cluster.GetAdmissions(ctx); !a.Has("m1") {
		t.Fatalf("precondition: m1 keeps its admission while h1 is off for its request")
	}
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) { h.Online = false }))
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		pass("m1")
		if a, _ := cluster.GetAdmissions(ctx); !a.Has("m1") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) { h.Online = true }))
	time.Sleep(300 * time.Millisecond)
	h1, _ := hosts.Get(ctx, "h1")
	t.Logf("h1 after the blip: online=%v pending=%v status=%+v", h1.Online, h1.Status.Pending(), h1.Status)

	from := time.Now()
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
		t.Fatalf("MaxCount(1): h1 (off since m1's request, never on since: truth %v) and h2 (truth %v) both off at once by remediation requests; admissions now %v",
			hw["h1"].Truth(), hw["h2"].Truth(), a.Machines)
	}
}

// TestReview40p_StrayRequestOnPrevHostReleasedWhileOff: prevHost
// (phased.go) and doc.go say a paused writer's request of the Machine's may
// land on State.PrevHost at any time, and the package doc promises that
// the storm guard still counts a host the remediation may have left off
// ("releases it on a later pass, once the host is on"). But a request that
// landed on PrevHost is only removed (RemovePrevRequest); nothing reads
// whether it powered the host off, and PrevHost is forgotten on the next
// pass that finds no request there (prevHost: !InFlight). With h1's BMC
// refusing the power-on (fault kept on), m1's admission is released while
// h1 is off for m1's own request (ground truth), and m2 powers h3 off
// under MaxCount(1): two hosts off at once.
func TestReview40p_StrayRequestOnPrevHostReleasedWhileOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "m2", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true}, reboot.Host{Name: "h3", Online: true})
	hw := map[string]*fake.Power{}
	for _, h := range []string{"h1", "h2", "h3"} {
		hw[h] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	}
	pw := func(h string) (power.Controller, error) { return hw[h], nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pw,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(func(context.Context) ([]string, error) { return []string{"h1", "h2", "h3"}, nil })}}
	go func() { _ = runner.Run(rctx) }()

	// m1's last attempt ran on h2 after it moved from h1 (PrevHost h1);
	// it is over, its Node back. Admitted, as the Reconciler records it.
	rec, err := c.Get(ctx, "m1")
	require.NoError(t, err)
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: time.Now().Add(-time.Minute)}
	require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
	a, err := c.GetAdmissions(ctx)
	require.NoError(t, err)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t0), At: t0, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	require.NoError(t, c.PutAdmissions(ctx, a))

	// A paused writer's request of m1's (its first attempt's, on h1) lands
	// now; h1's BMC refuses every power-on from here on.
	hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) {
		h.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t0)}
	}))
	require.Eventually(t, func() bool { return !hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 powered off for the stray request")

	hostOf := map[string]string{"m1": "h2", "m2": "h3"}
	rem := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, StaleReads: 100 * time.Millisecond, OwnerOnline: true,
			HostOf: func(_ context.Context, m string) (string, error) { return hostOf[m], nil }},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second}}
	pass := func(m string) {
		_, err := rem.Reconcile(ctx, m)
		rec, _ := c.Get(ctx, m)
		t.Logf("%s: err=%v state=%+v", m, err, rec.State)
	}
	for i := 0; i < 5; i++ {
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	from := time.Now()
	c.SetNodeReady("m2", false)
	c.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		pass("m2")
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	h1, _ := hosts.Get(ctx, "h1")
	t.Logf("h1 annotations=%v status=%+v", h1.Annotations, h1.Status)
	if hw["h1"].OffThroughout(from, to) && hw["h3"].WasOffDuring(from, to) {
		a, _ := c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request, never on since: truth %v) and h3 (truth %v) both off at once by remediation requests; admissions now %v",
			hw["h1"].Truth(), hw["h3"].Truth(), a.Machines)
	}
}

// TestReview40p_GoneMachineOnlineBlipReleasesHostStillOff: review 40o
// made a gone Machine's host with Online false Offline "whatever its
// power" (reboothosts.go: gone skips the synthesized RebootPending), on the
// premise that "a deleted Machine's host is deprovisioned and kept off".
// The code checks Online alone, never reboot.Host.Deprovisioned (kube
// fills it; OperatorHosts requires the host available/ready for exactly
// this reason: "spec.online false alone is one reading of a wish its
// owner may take back (a blip)"). m1 failed with h1's BMC refusing the
// power-on and was deleted by the escalation; its owner flips h1's Online
// false and back to true (h1 never deprovisioned: picked again for the
// replacement). m1's admission goes at the Online false reading and is not
// taken back; h1 stays off throughout (ground truth) while the reboot
// controller keeps powering it on, and m2 powers h2 off under MaxCount(1).
func TestReview40p_GoneMachineOnlineBlipReleasesHostStillOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second, RetryLimit: -1})
	g.rh.Power = func(h string) (power.Controller, error) { return g.hw[h], nil }
	g.rh.StaleReads = 100 * time.Millisecond
	g.rh.OwnerOnline = true
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", HasControllerOwner: true})
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		_ = g.pass(t)
		if _, err := g.cluster.Get(ctx, "m1"); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := g.cluster.Get(ctx, "m1")
	require.Error(t, err, "precondition: the remediation failed and deleted the Machine for its owner")
	a, _ := g.cluster.GetAdmissions(ctx)
	require.True(t, a.Has("m1"), "precondition: m1's admission kept while h1 is off for its request")

	from := time.Now()
	rh := g.hosts.(*fake.RebootHosts)
	require.NoError(t, rh.Mutate("h1", func(h *reboot.Host) { h.Online = false }))
	for i := 0; i < 10; i++ {
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, rh.Mutate("h1", func(h *reboot.Host) { h.Online = true })) // the blip ends: not deprovisioned
	for i := 0; i < 10; i++ {
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	// m2, on h2, fails.
	g.hostOf.Store("h2")
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: false})
	g.cluster.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		_, _ = g.rem.Reconcile(ctx, "m2")
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	h1, _ := g.hosts.Get(ctx, "h1")
	a, _ = g.cluster.GetAdmissions(ctx)
	t.Logf("h1 online=%v deprovisioned=%v status=%+v admissions=%v", h1.Online, h1.Deprovisioned, h1.Status, a.Machines)
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		t.Fatalf("MaxCount(1): h1 (off since m1's request, Online true again, never deprovisioned: truth %v) and h2 (truth %v) both off by remediation requests; m1's admission went at one Online false reading; admissions now %v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), a.Machines)
	}
}
