package remediation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_ClearedMovedMachineBlockedByReusedOldHost: round 20 makes
// a cleared (none) remediation read State.Host for its last attempt's
// request (held.go LastRequest: Value RebootValue(u1, RequestedAt), At
// RequestedAt, Host State.Host), whatever HostOf answers now. decide's
// over-phase case "st.Host != "" && o.Host.Name != st.Host &&
// (o.State.Phase != PhaseDone || o.State.Canceled) && moveBlocked(o)"
// (phased.go) so now applies to none: a Machine whose failed remediation
// on h2 was cleared once h2 was on again (the request gone, the host not
// held), and which was re-provisioned on h3 since, is blocked from a new
// remediation while h2 is off for anything at all after that old request
// (offFor reads the host's RebootPending and OffAfterRequest, whoever
// asked): here an operator's reboot of h2, which went back to the pool,
// its BMC refusing the power-on. m1 is never power-cycled on h3; after
// Timeout it gives up (PhaseFailed, "host h2 ... may still be off for
// the last request"): a remediation that would have succeeded fails (with
// an owner: the Machine is deleted) for another's reboot of a host it
// left long ago, and while h2 stays off it fails every time. Before
// round 20 none read no request and started on h3.
func TestReview40_ClearedMovedMachineBlockedByReusedOldHost(t *testing.T) {
	ctx := context.Background()
	// Its failure is long past (no "unhealthy again" within an hour).
	t1 := time.Now().Add(-2 * time.Hour)
	g := newRig40q(t, []string{"h2", "h3", "h4"},
		remediation.State{Phase: remediation.PhaseFailed, Attempt: 2, Started: t1, RequestedAt: t1, Host: "h2", Finished: t1.Add(30 * time.Second),
			Message: "node not back in time: retries exhausted, remediation failed"}, "h4")
	// m1 healthy again (re-provisioned on h3): its failure is cleared (h2
	// is on, its request gone: not held).
	g.hostOf["m1"] = "h3"
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	var s remediation.State
	for i := 0; i < 3; i++ {
		s = g.pass(t, "m1")
	}
	a, _ := g.c.GetAdmissions(ctx)
	require.Equal(t, remediation.PhaseNone, s.Phase, "precondition: m1's failed remediation cleared")
	require.False(t, a.Has("m1"), "precondition: m1's admission released")

	// h2 went back to the pool: an operator's reboot of it (no Machine's
	// request), its BMC refusing the power-on.
	refuseOn(g.hw["h2"])
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: "operator maintenance"}
	}))
	require.Eventually(t, func() bool { return !g.hw["h2"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h2 off for the operator's reboot")

	// m1, on h3, needs remediation.
	from := time.Now()
	g.c.SetNodeReady("m1", false)
	g.c.SetNeedsRemediation("m1", true)
	for end := time.Now().Add(g.rem.Config.Timeout + 2*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if s.Phase == remediation.PhaseFailed || g.hw["h3"].WasOffDuring(from, time.Now()) {
			break
		}
	}
	if !g.hw["h3"].WasOffDuring(from, time.Now()) {
		// And once m1 is healthy again, the failure is not cleared while
		// h2 stays off (keeps: held, read for m1's old request on h2).
		g.c.SetNeedsRemediation("m1", false)
		g.c.SetNodeReady("m1", true)
		after := g.pass(t, "m1")
		h2, _ := g.hosts.Get(ctx, "h2")
		t.Logf("m1 healthy again: phase %s message %q", after.Phase, after.Message)
		t.Fatalf("m1 (on h3, unhealthy) was never power-cycled: phase %s attempt %d host %s message %q; it waited for h2, a host it left whose failure was cleared, off only for an operator's reboot (annotation %q; truth h2 %v, h3 %v)",
			s.Phase, s.Attempt, s.Host, s.Message, h2.Annotations[remediation.RebootAnnotation], g.hw["h2"].Truth(), g.hw["h3"].Truth())
	}
}

// TestReview40_OrphanSweepReleasesWhileHostOff: a gone Machine admitted by
// a record written before Admissions.Requests existed (no request, no
// Member) whose host HostOf no longer resolves has "the requests no
// existing Machine owns ... removed first" (doc.go; reconciler.go
// releaseRecorded -> removeOrphans, now under the Guard), "else the
// admission is kept ...: a host that may carry its request is never let
// go". After the sweep, releaseRecorded asks stillHeld with the recorded
// request, which is empty (req.Value == "": "holds nothing it can
// tell"), and releases the admission in the same pass: the host the
// swept request powered off is never read. Here h1 is off for m0's
// request (its BMC refusing the power-on, the fault kept on): m0's
// admission is released while h1 is off, and m2 is admitted under
// MaxCount(1) and powers h2 off: two hosts off at once by ground truth.
// A live Machine's admission, and a gone one with a recorded request
// (stillHeld), is kept while its host is off after its request.
func TestReview40_OrphanSweepReleasesWhileHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h1", "h2"}, remediation.State{}, "h2")
	// m0 was deleted mid-remediation; its admission is from an old record.
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = []string{"m0"}, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	refuseOn(g.hw["h1"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u0", t0)}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 off for m0's request")
	rh := g.rem.Hosts.(*remediation.RebootAPIHosts)
	rh.HostOf = func(_ context.Context, m string) (string, error) {
		if m == "m0" {
			return "", fmt.Errorf("%s: %w", m, remediation.ErrNotFound)
		}
		return g.hostOf[m], nil
	}
	g.rem.Hosts = &findingHosts{RebootAPIHosts: rh, hosts: g.hosts, names: []string{"h1", "h2"}}
	_, err := g.rem.Reconcile(ctx, "m0")
	t.Logf("m0's pass: %v", err)
	a, _ = g.c.GetAdmissions(ctx)
	t.Logf("admissions after m0's pass: %v", a.Machines)

	from := time.Now()
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	for i := 0; i < 20 && !g.hw["h2"].WasOffDuring(from, time.Now()); i++ {
		g.pass(t, "m2")
		if _, err := g.rem.Reconcile(ctx, "m0"); err != nil {
			t.Logf("m0's pass: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ = g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m0's swept request, truth %v) and h2 (m2's, truth %v) both off at once; m0's admission released right after the sweep without reading h1; admissions %v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), a.Machines)
	}
}

// TestReview40_LostStateStrayReadAfterItsPowerOff: a Machine whose
// persisted State is lost (none, never remediated as far as it knows:
// its record re-created under the same UID, as remediation.Records'
// UID is the server's name, or its state annotation dropped) finds a
// request of its own on its host (round 20: LastRequest for none names
// its UID) and records it (StraySeen, admitted again: ownStray). But
// LastRequest reads the host for a request whose T is StraySeen, the
// pass's clock (held.go: at = cmp.Or(RequestedAt, Started, Finished,
// StraySeen)), not the T the found value carries: the reboot controller
// powered the host off for that request before the pass found it, so
// once the request is removed nothing read is "after the request"
// (OffAfterRequest false, no reboot pending): the next pass forgets the
// sighting and releases the admission while the host is off (its BMC
// refusing the power-on, the fault kept on), and m2 is admitted under
// MaxCount(1): two hosts off at once by ground truth.
func TestReview40_LostStateStrayReadAfterItsPowerOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h1", "h2"}, remediation.State{}, "h2")
	g.hostOf["m1"] = "h1"
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = nil, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	// m1's request (its own UID) is on h1, which was powered off for it;
	// its BMC refuses the power-on.
	refuseOn(g.hw["h1"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t0)}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 off for m1's request")
	time.Sleep(100 * time.Millisecond) // the pass comes a little later
	s := g.pass(t, "m1")
	a, _ = g.c.GetAdmissions(ctx)
	require.False(t, s.StraySeen.IsZero(), "precondition: m1 found its request on h1")
	require.True(t, a.Has("m1"), "precondition: m1 admitted for it")

	from := time.Now()
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	for i := 0; i < 20 && !g.hw["h2"].WasOffDuring(from, time.Now()); i++ {
		g.pass(t, "m1")
		g.pass(t, "m2")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ = g.c.GetAdmissions(ctx)
		rec, _ := g.c.Get(ctx, "m1")
		t.Fatalf("MaxCount(1): h1 (off for m1's own request, truth %v) and h2 (m2's, truth %v) both off at once; m1's sighting read for T=StraySeen, after the power-off, and forgotten: state straySeen %v; admissions %v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), rec.State.StraySeen, a.Machines)
	}
}
