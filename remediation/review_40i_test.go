package remediation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40i_RecreatedSameNameLeavesOldHostOff: doc.go: "a Machine
// deleted mid-remediation (its State goes with it) has the request
// removed from that host, whatever HostOf answers then ..., and only then
// its admission released". The admission record is keyed by the
// Machine's name only. m1 (UID uid-m1) holds h1 off mid-remediation; it is
// deleted and a Machine of the same name (another UID: the inventory's
// new record for a re-racked server, or a name reused by the user's own
// MachineStore) is created, on h2, healthy, before a pass sees the name
// missing (a work queue coalesces both events into one pass). The pass
// reads the new Machine, finds it admitted (the old one's admission),
// decides "healthy: release" and release() deletes the admission together
// with Admissions.Requests["m1"], the only record of the request on h1,
// without removing it (reconciler.go Reconcile never compares the
// recorded request with the Machine it reads; abandon runs only on
// ErrNotFound). h1 stays held off for good, owned by nobody. Ground
// truth: h1's fake hardware.
func TestReview40i_RecreatedSameNameLeavesOldHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	a, err := g.cluster.GetAdmissions(context.Background())
	require.NoError(t, err)
	require.Equal(t, "h1", a.Requests["m1"].Host, "precondition: the request on h1 is recorded with the admission")

	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1-new", NodeName: "m1", Cluster: "c"})
	g.cluster.SetNodeReady("m1", true)
	g.hostOf.Store("h2")
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	a, _ = g.cluster.GetAdmissions(context.Background())
	held, off, ann := g.h1Held(t, 2*time.Second)
	if (held || off) && !a.Has("m1") {
		t.Fatalf("the old m1's request still holds h1 (annotations %v, hardware off %v) but the admission, and with it the only record of that request (Requests), is released (%v, %v): h1 is off for good; truth %v",
			ann, off, a.Machines, a.Requests, g.hw["h1"].Truth())
	}
	if held || off {
		t.Fatalf("h1 still held (annotations %v), off %v", ann, off)
	}
}

// pausedAdd is a RebootHosts whose next AddRebootAnnotation runs between
// the Reconciler's check of the persisted attempt and the write (the
// pause of a writer without a Guard).
type pausedAdd struct {
	*remediation.RebootAPIHosts
	between func()
}

func (h *pausedAdd) AddRebootAnnotation(ctx context.Context, m string, req remediation.Request) error {
	if f := h.between; f != nil {
		h.between = nil
		f()
	}
	return h.RebootAPIHosts.AddRebootAnnotation(ctx, m, req)
}

// TestReview40i_StrayRequestAfterMoveNeverRemoved: doc.go (Concurrency):
// "a request that still lands (no Guard) is owned by no attempt and
// removed by the next pass over its Machine (a finished remediation
// never leaves a request on a host)". Process A decides m1's request on
// h1 (State.Host h1 persisted), passes its check of the persisted
// attempt, and pauses before the write. Meanwhile m1 is moved to h2 and
// process B's pass, finding h1 without a request, writes a new request on
// h2 (State.Host h2). A's write then lands on h1. Every later pass reads
// and removes m1's request only on State.Host (h2) (RequestFor,
// phased.go; RebootAPIHosts.Get reads req.Host), and the Loop watches only
// State.Host and HostOf's host: nothing ever looks at h1 again. h1 stays
// held off for good while h2 is held too (two hosts for one Machine),
// and after the remediation ends. Ground truth: h1's fake hardware.
func TestReview40i_StrayRequestAfterMoveNeverRemoved(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	other := *g.rem // process B: the same stores, the plain host store
	h := &pausedAdd{RebootAPIHosts: g.rh}
	g.rem.Hosts = h
	h.between = func() {
		g.hostOf.Store("h2")
		_, err := other.Reconcile(context.Background(), "m1")
		t.Logf("B's pass: err=%v state=%+v", err, g.state())
	}
	g.cluster.SetNodeReady("m1", false)
	g.cluster.SetNeedsRemediation("m1", true)
	t.Logf("A's pass: %v", g.pass(t))
	require.Equal(t, "h2", g.state().Host, "precondition: B moved the attempt to h2")
	require.Eventually(t, func() bool { return !g.hw["h2"].HardwareOn() }, 10*time.Second, 10*time.Millisecond,
		"precondition: the reboot controller powers h2 off for B's request")
	// The Machine is made healthy (the health checker clears its mark):
	// the remediation ends; and later passes run.
	g.cluster.SetNeedsRemediation("m1", false)
	g.cluster.SetNodeReady("m1", true)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && remediation.InFlight(g.state().Phase); {
		_ = g.pass(t)
		time.Sleep(100 * time.Millisecond)
	}
	_ = g.pass(t)
	a, _ := g.cluster.GetAdmissions(context.Background())
	t.Logf("after the remediation: phase %s, admitted %v", g.state().Phase, a.Has("m1"))
	held, off, ann := g.h1Held(t, 2*time.Second)
	require.False(t, remediation.InFlight(g.state().Phase), "precondition: the remediation ended")
	if held || off {
		t.Fatalf("m1's request written to h1 by the paused pass still holds h1 (annotations %v, hardware off %v) after every later pass over m1 (state %+v): nothing reads h1 after the move; truth %v",
			ann, off, g.state(), g.hw["h1"].Truth())
	}
}

// TestReview40i_DeletedWhileDownNeverAbandoned: doc.go: "a Machine
// deleted mid-remediation ... has the request removed from that host ...
// and only then its admission released"; Loop's doc: Keys lists the
// Machines, and "a Machine that is gone and whose admission is released
// is left alone". A Machine deleted while the remediation process is
// down (a restart, an upgrade, a leader change) is in no listing of the
// Machines when the Loop starts again, and nothing else names it: the
// admission record (which does, with its request) is never read for
// Machines that are gone (run.go Loop; reboot.Runner reconciles only
// listed or added keys). Its request holds h1 off for good and its
// admission takes the storm guard's slot for ever: with MaxCount(1) no
// other remediation can start. Ground truth: h1's fake hardware.
func TestReview40i_DeletedWhileDownNeverAbandoned(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	// The remediation process is down; m1 is deleted meanwhile.
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	// It starts again, listing the Machines as its keys.
	names := func(ctx context.Context) ([]string, error) {
		recs, err := g.cluster.List(ctx)
		var out []string
		for _, r := range recs {
			out = append(out, r.Machine.Name)
		}
		return out, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := &reboot.Runner{Loops: []reboot.Loop{g.rem.Loop(names)}}
	go func() { _ = run.Run(ctx) }()
	held, off, ann := g.h1Held(t, 3*time.Second)
	a, _ := g.cluster.GetAdmissions(context.Background())
	if held || off || a.Has("m1") {
		t.Fatalf("m1 was deleted mid-remediation while the Loop was down; 3 s after it started again h1 is still held (annotations %v, hardware off %v) and m1's admission kept (%v, requests %v): nothing ever reconciles a deleted Machine the keys no longer list; truth %v",
			ann, off, a.Machines, a.Requests, g.hw["h1"].Truth())
	}
}

// removeFailsFor is a RebootHosts whose removals of one Machine's request
// fail (its host's API refuses them for now).
type removeFailsFor struct {
	*remediation.RebootAPIHosts
	machine string
}

func (h *removeFailsFor) RemoveRebootRequest(ctx context.Context, m string, req remediation.Request) error {
	if m == h.machine {
		return errors.New("hosts: connection refused")
	}
	return h.RebootAPIHosts.RemoveRebootRequest(ctx, m, req)
}

// TestReview40i_DeletedAdmittedNotCountedByStormGuard: doc.go, the
// caller's duties: "ask the storm guard (MayStart) over the whole fleet,
// counting admitted machines as remediating"; Guarantees: "At most the
// storm guard's limit of remediations ... are in flight at any instant";
// a deleted Machine keeps its admission until its request is removed
// (its host may be off). But the fleet the Reconciler hands MayStart is
// Machines.List (reconciler.go: fleet from `all`), which no longer has
// the deleted Machine, so its admission counts for nothing: with
// MaxCount(1), m1 deleted while its request holds h1 off (its removal
// failing for now, admission kept), m2's remediation is admitted and h2
// powered off too: two hosts off, limit one. Ground truth: both fake
// hardwares off at once.
func TestReview40i_DeletedAdmittedNotCountedByStormGuard(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.cluster.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	g.startOnH1(t, true)
	g.rh.HostOf = func(_ context.Context, m string) (string, error) {
		return map[string]string{"m1": "h1", "m2": "h2"}[m], nil
	}
	g.rem.Hosts = &removeFailsFor{RebootAPIHosts: g.rh, machine: "m1"}
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	_ = g.pass(t) // abandon fails: m1 stays admitted, h1 held
	a, _ := g.cluster.GetAdmissions(context.Background())
	require.True(t, a.Has("m1"), "precondition: deleted m1 keeps its admission while its request is not removed")

	g.cluster.SetNodeReady("m2", false)
	g.cluster.SetNeedsRemediation("m2", true)
	_, err := g.rem.Reconcile(context.Background(), "m2")
	t.Logf("m2's pass: %v", err)
	time.Sleep(2 * time.Second)
	a, _ = g.cluster.GetAdmissions(context.Background())
	if !g.hw["h1"].HardwareOn() && !g.hw["h2"].HardwareOn() {
		t.Fatalf("limit MaxCount(1): deleted m1 (admitted %v) holds h1 off and m2's remediation was admitted too (%v): h1 and h2 are off at once; truths h1 %v h2 %v",
			a.Has("m1"), a.Machines, g.hw["h1"].Truth(), g.hw["h2"].Truth())
	}
	require.False(t, a.Has("m2"), "m2 may not be admitted while deleted m1's admission (its host held off) is in the record")
}
