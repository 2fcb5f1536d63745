package remediation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40n_MovedWithoutPowerFailsHealthyHosts: a library user who
// builds RebootAPIHosts as the package doc and kube.NewRemediationReconciler
// do, without Power (kube's doc never named SetRemediationPower), has every
// Machine that moves after its host was powered off for the request fail
// its remediation, with every BMC healthy: moveBlocked (phased.go) needs
// Host.Power == On, which only Power fills. Asking h2 on the reboot
// controller's record alone would power a second host off while the
// first may be off (its record is written before the power-on is sent,
// review 40n DoneAfterCancelMovedStartsOnRecordAlone), so the fix is
// not to ask h2 without a reading: the failure message must say why
// (Power unset, naming RebootAPIHosts.Power and kube.SetRemediationPower)
// and, with Power set, the moved Machine's new host is remediated.
// (Round 14 asked for h2 without Power; changed: that asserted the
// unsafe rule finding 3 removes.) Review 40o: without Power, the reboot
// controller's own confirmation (reboot.Status.OnConfirmed, from an On
// reading that cannot be an echo) is that reading: with healthy BMCs h2
// is asked, never on the record alone; with h1's BMC refusing the
// power-on, the remediation fails with the message above.
func TestReview40n_MovedWithoutPowerFailsHealthyHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		withPower, taken bool // Power set; h1's BMC refuses power-ons
	}{{"no Power", false, false}, {"Power", true, false}, {"no Power, h1 refuses power-on", false, true}} {
		g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second})
		if tc.withPower {
			g.rh.Power = func(h string) (power.Controller, error) { return g.hw[h], nil }
			g.rh.StaleReads = 100 * time.Millisecond // the reboot controller's
		}
		g.startOnH1(t, true)
		if tc.taken {
			g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
				if c.Op == fake.OpOn {
					return fake.Fault{Kind: fake.FaultFailed}
				}
				return fake.Fault{}
			}})
		}
		g.hostOf.Store("h2") // the Machine now maps to h2
		deadline := time.Now().Add(4 * time.Second)
		asked := false
		var h1 reboot.Host
		for time.Now().Before(deadline) && !asked {
			h1, _ = g.hosts.Get(context.Background(), "h1") // before the pass: its evidence then
			_, _ = g.rem.Reconcile(context.Background(), "m1")
			asked = g.state().Host == "h2"
			if !asked && g.state().Phase == remediation.PhaseFailed {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		st := g.state()
		switch {
		case !tc.taken && !asked:
			t.Fatalf("%s: h1 back on by ground truth (truth %v), every BMC healthy: want h2 asked; ended %s: %q",
				tc.name, g.hw["h1"].Truth(), st.Phase, st.Message)
		case !tc.withPower && asked && !h1.Status.OnConfirmed.Equal(h1.Status.LastPoweredOn):
			t.Fatalf("%s: h2 asked on the reboot controller's record alone (h1 status %+v, truth %v)", tc.name, h1.Status, g.hw["h1"].Truth())
		case tc.taken && asked:
			t.Fatalf("%s: h2 asked while h1 is off for the request (truth %v)", tc.name, g.hw["h1"].Truth())
		case tc.taken && (st.Phase != remediation.PhaseFailed || !strings.Contains(st.Message, "RebootAPIHosts.Power") || !strings.Contains(st.Message, "kube.SetRemediationPower")):
			t.Fatalf("%s: want the remediation failed with a message naming RebootAPIHosts.Power and kube.SetRemediationPower; got %s: %q", tc.name, st.Phase, st.Message)
		}
	}
}

// TestReview40n_OfflineBlipReleasesHostStillOffForRequest: held.go says a
// host its owner keeps off (Host.Offline) "stays off by its owner's will,
// and no power-on for the request will ever come", so its admission goes.
// But the reboot controller keeps the reboot pending while Online is
// false ("off; held while Online is false", reboot/decide.go heldOff) and
// powers the host on for it as soon as Online is true again. h1, powered
// off for m1's request, its BMC refusing On (the fault still on): the
// owner sets spec.online false and back true; during the blip m1's
// cancelled remediation gives up and releases its admission; then h1 is
// again off for the request, its reboot still pending, the reboot
// controller trying to power it on, and counted by nobody: m2 is
// admitted under MaxCount(1) and h2 is powered off. Ground truth: h1 and
// h2 off at once, both by remediation requests, for a limit of one.
func TestReview40n_OfflineBlipReleasesHostStillOffForRequest(t *testing.T) {
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

	// m1 is remediated: h1 powered off for its request.
	cluster.SetNodeReady("m1", false)
	cluster.SetNeedsRemediation("m1", true)
	pass("m1")
	require.Eventually(t, func() bool { return !hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 powered off")
	// h1's BMC refuses every power-on from now on; the checker cancels.
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
	// The owner blips spec.online: false, then true again.
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
	time.Sleep(300 * time.Millisecond) // the reboot controller tries to power h1 on for the pending reboot: refused
	h1, _ := hosts.Get(ctx, "h1")
	t.Logf("h1 after the blip: online=%v pending=%v status=%+v", h1.Online, h1.Status.Pending(), h1.Status)

	// m2 fails: the storm guard must not let a second host go off.
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

// TestReview40n_DoneAfterCancelMovedStartsOnRecordAlone: phased.go's
// moveBlocked says the reboot controller's record of a power-on (without
// RebootAPIHosts.Power) is "enough to release an admission, not to power
// a second host off for the same one", and State.Host says "never two
// held at once". The Done-after-cancel case added for round 13
// (phased.go, `keeps(o.State, o.Host)` in PhaseNone/Done/Failed) judges
// the old host with held, which trusts that record: h1, powered off for
// m1's request, its BMC refusing every power-on (the fault still on), has
// its power-on recorded; the cancelled remediation gives up waiting
// (Done); m1, now mapping to h2 and unhealthy again, starts a new attempt
// and h2 is powered off. Ground truth: h1 and h2 off at once for one
// Machine's requests, one admission.
func TestReview40n_DoneAfterCancelMovedStartsOnRecordAlone(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second})
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	g.cluster.SetNeedsRemediation("m1", false) // cancelled
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && g.state().Phase != remediation.PhaseDone {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, remediation.PhaseDone, g.state().Phase, "precondition: the cancelled remediation gave up waiting")
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 still off (its BMC refuses On)")
	from := time.Now()
	g.hostOf.Store("h2")
	g.cluster.SetNeedsRemediation("m1", true)
	for i := 0; i < 10; i++ {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ := g.cluster.GetAdmissions(context.Background())
		t.Fatalf("h1 off since m1's request, never on since (truth %v), and h2 powered off for m1's new attempt (truth %v): two hosts held at once for one Machine; admissions %v, state %+v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), a.Machines, g.state())
	}
}

// TestReview40n_RetryAfterMoveForgetsPrevHost: State.PrevHost is "the
// host the request was written to before the last move (Host's value
// then)", read every pass so that a request a paused writer lands there
// after the move is removed whenever it lands. decide's request() sets it
// on a move; retryOrEscalate (phased.go, the retry branch) moves the
// attempt to the new host (st.Host = o.Host.Name) without it: a Machine
// whose node did not come back in time after it moved is retried on h2
// with PrevHost empty, and h1 is never read again.
func TestReview40n_RetryAfterMoveForgetsPrevHost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	for _, ph := range []remediation.Phase{remediation.PhasePoweringOn, remediation.PhaseWaitingForNode} {
		st := remediation.State{Phase: ph, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1"}
		// bmh-1 read on since the request (power reading On): the move is not blocked.
		h := remediation.Host{Name: "bmh-2", OffAfterRequest: true, PoweredOn: ph == remediation.PhaseWaitingForNode, Power: power.StateOn}
		d := remediation.Config{Timeout: 10 * time.Minute}.Decide(remediation.Observed{Machine: m, State: st, Host: h, Admitted: true}, t0.Add(time.Hour))
		if !d.AddRebootAnnotation || d.State.Host != "bmh-2" {
			t.Logf("%s: not a retry on bmh-2: %+v", ph, d)
			continue
		}
		if d.State.PrevHost != "bmh-1" {
			t.Errorf("%s, moved from bmh-1, timed out: retried on bmh-2 with PrevHost %q, want bmh-1 (a stray request landing there is never removed)", ph, d.State.PrevHost)
		}
	}
}

// TestReview40n_HostlessRestartForgetsHeldOldHost: the Done-after-cancel
// rule added in round 13 (phased.go, PhaseNone/Done/Failed: "its request
// is gone, but the host is still off for it") applies only when the
// Machine maps to another host (o.Host.Name != ""). A Machine that maps to
// no host now (HostOf "": its host released) and is marked again starts a
// new attempt with State.Host "" (start), forgetting h1, which is still
// off for the last request (its BMC refusing On, read Off through Power);
// at the attempt's timeout it escalates and releases its admission, judged
// on the new request's (no) host. Ground truth: h1 off since m1's request,
// never on since, and no admission counts it.
func TestReview40n_HostlessRestartForgetsHeldOldHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second})
	g.rh.Power = func(h string) (power.Controller, error) { return g.hw[h], nil }
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	g.cluster.SetNeedsRemediation("m1", false) // cancelled
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && g.state().Phase != remediation.PhaseDone {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, remediation.PhaseDone, g.state().Phase, "precondition: the cancelled remediation gave up waiting")
	a, _ := g.cluster.GetAdmissions(ctx)
	require.True(t, a.Has("m1"), "precondition: m1 keeps its admission while h1 is off for its request")
	from := time.Now()
	g.hostOf.Store("") // its host released: the Machine maps to none
	g.cluster.SetNeedsRemediation("m1", true)
	for i := 0; i < 40; i++ {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	a, _ = g.cluster.GetAdmissions(ctx)
	if g.hw["h1"].OffThroughout(from, to) && !a.Has("m1") {
		t.Fatalf("h1 off since m1's request, never on since (truth %v), yet m1's admission is released; state %+v", g.hw["h1"].Truth(), g.state())
	}
}
