package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40j_StrayAfterLastRemovalNeverRemoved: doc.go (Concurrency):
// "a request that still lands (no Guard) is owned by no attempt and
// removed by the next pass over its Machine that removes its request (a
// finished remediation never leaves a request on a host) ... one that
// lands on the host the Machine was moved from is removed there too
// (State.PrevHost), by every later removal of the attempt's request".
// Process A decides m1's request on h1 and pauses before the write; m1 is
// moved to h2 and process B runs the attempt there up to powering-on (its
// removal of the request, on h2 and on PrevHost h1, finds nothing on h1
// yet). A's write then lands on h1 while the remediation is still in
// flight. No later pass removes anything: powering-on and
// waiting-for-node decide RemoveRebootAnnotation only when the request's
// host (State.Host, h2) still has it (phased.go PhasePoweringOn /
// PhaseWaitingForNode: `d.RemoveRebootAnnotation = o.Host.RebootAnnotation`),
// and done reads only h2. The remediation ends done and h1 stays held off
// for good. Ground truth: h1's fake hardware.
func TestReview40j_StrayAfterLastRemovalNeverRemoved(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	other := *g.rem // process B
	h := &pausedAdd{RebootAPIHosts: g.rh}
	g.rem.Hosts = h
	h.between = func() {
		g.hostOf.Store("h2")
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && g.state().Phase != remediation.PhasePoweringOn; {
			_, err := other.Reconcile(context.Background(), "m1")
			t.Logf("B's pass: err=%v state=%+v", err, g.state())
			time.Sleep(50 * time.Millisecond)
		}
	}
	g.cluster.SetNodeReady("m1", false)
	g.cluster.SetNeedsRemediation("m1", true)
	t.Logf("A's pass: %v", g.pass(t))
	st := g.state()
	require.Equal(t, remediation.PhasePoweringOn, st.Phase, "precondition: B took the attempt on h2 to powering-on")
	require.Equal(t, "h2", st.Host)
	require.Equal(t, "h1", st.PrevHost, "precondition: h1 is recorded as the host before the move")
	// The Node comes back; the remediation runs to its end.
	g.cluster.PutNode(remediation.Node{Name: "m1", UID: "n1-again", Ready: true})
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && remediation.InFlight(g.state().Phase); {
		_ = g.pass(t)
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	require.False(t, remediation.InFlight(g.state().Phase), "precondition: the remediation ended")
	held, off, ann := g.h1Held(t, 2*time.Second)
	if held || off {
		t.Fatalf("the remediation ended (state %+v) but the request A's paused pass wrote to h1 (PrevHost) during the attempt still holds h1 (annotations %v, hardware off %v): no pass after the last removal removes it; truth %v",
			g.state(), ann, off, g.hw["h1"].Truth())
	}
}

// TestReview40j_AbandonReleasesWhileHostOff: doc.go, Guarantees: "At most
// the storm guard's limit of remediations ... are in flight at any
// instant" and "A remediation that is over without its host known on ...
// keeps its admission while its host is held (... off after its request
// and not Host.PoweredOn since) ... the storm guard still counts a host it
// may have left off". A live Machine's remediation keeps its admission
// until the reboot controller powered its host on (phased.go: keeps,
// held). A Machine deleted mid-remediation does not: abandon
// (reconciler.go releaseRecorded) removes its request and releases the
// admission in the same pass, while its host is still off (here its BMC
// refuses power-on for now: the fault still on). With MaxCount(1), m2's
// remediation is then admitted and h2 powered off while h1 is still off:
// two hosts off, limit one. Ground truth: both fake hardwares off at once.
func TestReview40j_AbandonReleasesWhileHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	g.rh.HostOf = func(_ context.Context, m string) (string, error) {
		return map[string]string{"m1": "h1", "m2": "h2"}[m], nil
	}
	g.startOnH1(t, true)
	// h1's BMC refuses power-on from now on (for as long as the test runs).
	g.hw["h1"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	t.Logf("m1's pass (gone): %v", g.pass(t))
	time.Sleep(300 * time.Millisecond)
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 is still off (its BMC refuses On)")

	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	_, err := g.rem.Reconcile(context.Background(), "m2")
	t.Logf("m2's pass: %v", err)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !g.hw["h1"].HardwareOn() && !g.hw["h2"].HardwareOn() {
			a, _ := g.cluster.GetAdmissions(context.Background())
			t.Fatalf("limit MaxCount(1): deleted m1's admission was released while h1 is still off (BMC refusing On), and m2 was admitted (%v): h1 and h2 off at once; truths h1 %v h2 %v",
				a.Machines, g.hw["h1"].Truth(), g.hw["h2"].Truth())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReview40j_GoneControlPlaneNotCountedAsControlPlane: doc.go,
// Guarantees: "At most the storm guard's limit of remediations, and at
// most one control-plane machine, are in flight at any instant"; a
// deleted Machine "keeps its admission while its request may hold its
// host off" and is counted by the storm guard. But withGone
// (reconciler.go) adds a gone admitted Machine to the fleet with
// ControlPlane false, whatever it was: MayStart's control-plane rule
// (guard.go cpBusy) never sees it. Control-plane m1 is deleted
// mid-remediation while its request holds h1 off (its removal failing
// for now: admission kept); control-plane m2 then becomes unhealthy and
// is admitted (the count limit, 5, allows it): two control-plane hosts
// off at once (etcd quorum of a three-member control plane lost). Ground
// truth: both fake hardwares off at once.
func TestReview40j_GoneControlPlaneNotCountedAsControlPlane(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.rem.Limit = remediation.MaxCount(5)
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", ControlPlane: true})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c", ControlPlane: true})
	g.cluster.AddMachine(remediation.Machine{Name: "m3", UID: "uid-m3", NodeName: "m3", Cluster: "c", ControlPlane: true})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	g.cluster.PutNode(remediation.Node{Name: "m3", UID: "n3", Ready: true})
	g.rh.HostOf = func(_ context.Context, m string) (string, error) {
		return map[string]string{"m1": "h1", "m2": "h2", "m3": "h3"}[m], nil
	}
	g.startOnH1(t, true)
	g.rem.Hosts = &removeFailsFor{RebootAPIHosts: g.rh, machine: "m1"}
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	_ = g.pass(t) // abandon fails: m1 stays admitted, h1 held off
	a, _ := g.cluster.GetAdmissions(context.Background())
	require.True(t, a.Has("m1"), "precondition: deleted m1 keeps its admission while its request is not removed")
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 is off")

	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	res, err := g.rem.Reconcile(context.Background(), "m2")
	t.Logf("m2's pass: %v, %s", err, res.Decision.Reason)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if !g.hw["h1"].HardwareOn() && !g.hw["h2"].HardwareOn() {
			a, _ = g.cluster.GetAdmissions(context.Background())
			t.Fatalf("control-plane m1 (deleted, admitted %v, its request holding h1 off) and control-plane m2 (admitted %v) are both remediating: h1 and h2 off at once; truths h1 %v h2 %v",
				a.Has("m1"), a.Has("m2"), g.hw["h1"].Truth(), g.hw["h2"].Truth())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a, _ = g.cluster.GetAdmissions(context.Background())
	require.False(t, a.Has("m2"), "a second control-plane remediation is admitted while deleted control-plane m1 is")
}

// TestReview40j_AdmittedWithoutHostThenDeletedHoldsSlotForEver: a
// Machine whose remediation is admitted while it has no host
// (Host.Missing: phased.go start admits and writes no request; the
// Reconciler records none, `attempt.Host != ""`) and that is then deleted
// has an admission with no recorded request: abandon (reconciler.go
// releaseRecorded) takes it for "a record written before Requests
// existed", asks HostOf, which for a deleted Machine wraps ErrNotFound (as
// kube.HostOfMachine does, and abandon's doc expects), and, the HostStore
// (RebootHosts) being no RequestFinder, keeps the admission with
// ErrOrphanRequest on every pass, for ever: no request exists anywhere,
// no host is off (ground truth: every host's annotations and fake
// hardware), yet with MaxCount(1) no other remediation is ever admitted,
// and the error tells the operator to remove an annotation that is not
// there.
func TestReview40j_AdmittedWithoutHostThenDeletedHoldsSlotForEver(t *testing.T) {
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	g.rh.HostOf = func(ctx context.Context, m string) (string, error) {
		if _, err := g.cluster.Get(ctx, m); err != nil {
			return "", err // a deleted Machine: ErrNotFound, as kube.HostOfMachine
		}
		return map[string]string{"m1": "", "m2": "h2"}[m], nil // m1 has no host (yet)
	}
	g.cluster.SetNodeReady("m1", false)
	g.cluster.SetNeedsRemediation("m1", true)
	require.NoError(t, g.pass(t))
	a, _ := g.cluster.GetAdmissions(context.Background())
	require.True(t, a.Has("m1"), "precondition: m1 is admitted with no host")
	require.Empty(t, a.Requests, "precondition: no request written or recorded")

	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	for i := 0; i < 3; i++ {
		t.Logf("m1 gone: %v", g.pass(t))
	}
	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	res, err := g.rem.Reconcile(context.Background(), "m2")
	t.Logf("m2's pass: %v, %s", err, res.Decision.Reason)
	for _, h := range []string{"h1", "h2"} {
		rec, err := g.hosts.Get(context.Background(), h)
		require.NoError(t, err)
		if _, held := rec.Annotations[remediation.RebootAnnotation]; held && h == "h1" {
			t.Fatalf("precondition: no request of m1 anywhere, but %s holds one", h)
		}
	}
	a, _ = g.cluster.GetAdmissions(context.Background())
	if a.Has("m1") || !a.Has("m2") {
		t.Fatalf("deleted m1 never wrote a reboot request (h1 on: %v, no annotation), yet its admission is kept (%v) and m2 refused (%q): the storm guard's only slot is taken for good",
			g.hw["h1"].HardwareOn(), a.Machines, res.Decision.Reason)
	}
}
