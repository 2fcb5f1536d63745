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

// TestReview40o_DeletedMachineReleasedHostHeldForGood: RebootAPIHosts's
// OwnerOnline doc: "A host with Online false and no request of the
// Machine's on it is then Host.Offline, not held ... so a Machine deleted
// after its host was released and deprovisioned gives its admission
// back." 76c7b57 made held() honour RebootPending over Offline and made
// RebootAPIHosts (with Power, which kube.SetRemediationPower and
// rebootkit-controller set) synthesize RebootPending for any recorded
// power-on after the request's power-off that no On reading confirms and
// no Status.OfflineSince follows. A host whose BMC refused the power-on
// (why the remediation failed and its Machine is being replaced) and
// which its owner then releases (spec.online false) was off when Online
// went false, so the reboot controller never writes OfflineSince: the
// synthesized RebootPending holds it for as long as it stays in the pool.
// This is review 40l's DeletedMachineDeprovisionedHostHeldForGood
// (fixed for kube.OperatorHosts by the provisioning state) again, for the
// hosts rebootkit drives. Ground truth: h1 off, Online false, no request
// on it, no reboot pending in the controller's own status
// (Status.Pending false): kept off by its owner. Under MaxCount(1) no
// other Machine is ever remediated.
func TestReview40o_DeletedMachineReleasedHostHeldForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second, RetryLimit: -1})
	g.rh.Power = func(h string) (power.Controller, error) { return g.hw[h], nil }
	g.rh.StaleReads = 100 * time.Millisecond // the reboot controller's
	g.rh.OwnerOnline = true                  // as kube.NewRemediationReconciler sets it
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", HasControllerOwner: true})
	g.startOnH1(t, true)
	// h1's BMC refuses every power-on from now on (why it is replaced).
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
			break // deleted by the escalation, for its owner to replace
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := g.cluster.Get(ctx, "m1")
	require.Error(t, err, "precondition: the remediation failed and deleted the Machine for its owner")
	a, _ := g.cluster.GetAdmissions(ctx)
	require.True(t, a.Has("m1"), "precondition: m1's admission kept while h1 is off for its request")

	// Its owner (CAPM3) releases h1: spec.online false, no consumer; it is
	// deprovisioned and kept off.
	g.hostOf.Store("")
	// (Review 40p: Online false alone may be a blip; the release is the
	// host deprovisioned, as kube.RebootHosts reports it.)
	require.NoError(t, g.hosts.(*fake.RebootHosts).Mutate("h1", func(h *reboot.Host) { h.Online, h.Unprovisioned = false, true }))
	from := time.Now()
	for i := 0; i < 60; i++ {
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	h1, _ := g.hosts.Get(ctx, "h1")
	a, _ = g.cluster.GetAdmissions(ctx)
	_, req := h1.Annotations[remediation.RebootAnnotation]
	t.Logf("h1 online=%v request=%v pending=%v status=%+v admitted=%v truth=%v", h1.Online, req, h1.Status.Pending(), h1.Status, a.Has("m1"), g.hw["h1"].Truth())
	if a.Has("m1") && !h1.Online && !req && !h1.Status.Pending() && g.hw["h1"].OffThroughout(from, time.Now()) {
		t.Fatalf("h1 released by its owner (online false, no request, no reboot pending in the controller's status) and kept off for it (truth %v), "+
			"yet the deleted Machine m1 keeps its admission for as long as h1 stays in the pool: RebootAPIHosts synthesizes RebootPending (no OfflineSince: h1 was already off when Online went false)",
			g.hw["h1"].Truth())
	}
}

// TestReview40o_OverRemediationMovedWithoutPowerStallsForGood: 97ab3f2
// added, for a remediation that is over (given up after a cancel; failed
// and cleared), "no new attempt, on another host or on none" while
// moveBlocked (phased.go, PhaseNone/Done/Failed). moveBlocked needs an On
// reading (Host.Power), which RebootAPIHosts without Power never gives
// (kube.NewRemediationReconciler's default, the package doc's RebootAPIHosts
// usage without Power). doc.go says of the in-flight case that "the
// attempt fails at its timeout with a message that says so"; this branch
// has no timeout and no escalation, and its message does not name Power:
// with every BMC healthy and h1 back on (ground truth), a Machine that
// moved to h2 and is unhealthy again waits for ever, neither remediated
// nor escalated (its owner never replaces it), "waiting for it to be
// powered on" although it is on. Correct: the wait ends (h2 asked, or the
// remediation fails naming RebootAPIHosts.Power) within a few timeouts.
func TestReview40o_OverRemediationMovedWithoutPowerStallsForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const timeout = 500 * time.Millisecond
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: timeout})
	g.startOnH1(t, true)
	g.cluster.SetNeedsRemediation("m1", false) // cancelled after the power-off
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && g.state().Phase != remediation.PhaseDone {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, remediation.PhaseDone, g.state().Phase, "precondition: the cancelled remediation ended")
	require.Eventually(t, func() bool { return g.hw["h1"].HardwareOn() }, 5*time.Second, 10*time.Millisecond,
		"precondition: h1 powered on by the reboot controller (truth %v)", g.hw["h1"].Truth())
	onFrom := time.Now()

	g.hostOf.Store("h2") // the Machine now maps to h2
	g.cluster.SetNeedsRemediation("m1", true)
	end := time.Now().Add(8 * timeout)
	for time.Now().Before(end) {
		_, _ = g.rem.Reconcile(ctx, "m1")
		st := g.state()
		if st.Host == "h2" || st.Phase == remediation.PhaseFailed {
			return // asked h2, or ended
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := g.state()
	if g.hw["h1"].HardwareOn() && !g.hw["h1"].WasOffDuring(onFrom, time.Now()) {
		t.Fatalf("h1 on throughout (truth %v), every BMC healthy: after %s (%d timeouts) m1, unhealthy, is neither remediated on h2 nor failed: %s: %q",
			g.hw["h1"].Truth(), 8*timeout, 8, st.Phase, st.Message)
	}
}

// TestReview40o_NoPowerReleasesAdmissionOfHostStillOff: the default
// wiring (kube.NewRemediationReconciler; RebootAPIHosts without Power, as
// the package doc describes it) judges Host.PoweredOn on the reboot
// controller's record alone, "written before the power-on is sent, which
// a BMC may refuse" (RebootAPIHosts.Power's own doc). h1, powered off for
// m1's request, its BMC refusing every power-on (the fault still on); the
// checker cancels; the remediation sees the recorded power-on as
// PoweredOn and releases m1's admission (done), though h1 is off for
// the request and the reboot controller is still trying to power it on.
// m2 fails: under MaxCount(1) it is admitted and h2 is powered off.
// Ground truth: h1 and h2 off at once by remediation requests, for a
// limit of one. doc.go: the storm guard "still counts a host it may have
// left off". Correct: without a power reading, a host powered off for
// the request is not known on (held), as moveBlocked already rules for
// moves; or NewRemediationReconciler wires Power.
func TestReview40o_NoPowerReleasesAdmissionOfHostStillOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Second})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n-m2", Ready: true})
	g.rh.HostOf = func(_ context.Context, m string) (string, error) {
		if m == "m2" {
			return "h2", nil
		}
		return g.hostOf.Load().(string), nil
	}
	g.startOnH1(t, true)
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	g.cluster.SetNeedsRemediation("m1", false) // cancelled after the power-off
	for i := 0; i < 40; i++ {
		_ = g.pass(t)
		time.Sleep(50 * time.Millisecond)
	}
	from := time.Now()
	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	for i := 0; i < 20; i++ {
		_, _ = g.rem.Reconcile(ctx, "m2")
		_, _ = g.rem.Reconcile(ctx, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ := g.cluster.GetAdmissions(ctx)
		h1, _ := g.hosts.Get(ctx, "h1")
		t.Fatalf("MaxCount(1), default wiring (no Power): h1 off since m1's request, never on since (truth %v; status %+v), and h2 (truth %v) powered off for m2: two hosts off at once; admissions %v, m1 %s %q",
			g.hw["h1"].Truth(), h1.Status, g.hw["h2"].Truth(), a.Machines, g.state().Phase, g.state().Message)
	}
}

// TestReview40o_SecondMoveForgetsPrevHostWithStrayRequest: State.PrevHost
// "is forgotten only once a pass of a remediation that is over finds none
// there (a new attempt keeps it)". start (phased.go) replaces it with the
// host it moves from (prev = st.Host) and retryOrEscalate's retry with
// st.Host likewise: a Machine that moved h1 → h2 (PrevHost h1, where a
// request of its was found: Observed.PrevHostRequest) and now maps to h3
// starts its next attempt with PrevHost h2, no RemovePrevRequest, and h1
// is never read again: the request found there holds h1 off for good.
func TestReview40o_SecondMoveForgetsPrevHostWithStrayRequest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(time.Minute)}
	// h2 read On since the request: not blocked.
	h := remediation.Host{Name: "h3", OffAfterRequest: true, PoweredOn: true, Power: power.StateOn}
	now := t0.Add(3 * time.Hour)
	d := remediation.Decide(remediation.Observed{Machine: m, State: st, Host: h, MayStart: true, PrevHostRequest: true}, now)
	if !d.AddRebootAnnotation {
		t.Fatalf("precondition: a new attempt on h3: %+v", d)
	}
	if d.State.PrevHost != "h1" && !d.RemovePrevRequest {
		t.Fatalf("a request of db-1's is on h1 (PrevHostRequest), yet the new attempt on h3 sets PrevHost %q and removes nothing: h1 is never read again, held off by it for good", d.State.PrevHost)
	}
}
