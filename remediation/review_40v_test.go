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

// TestReview40_OrphanSweepRecordsOtherOrphan: round 21's fix
// (reconciler.go removeOrphans/recordOrphan) records "the first" request
// no Machine owns as the gone Machine's (Admissions.Requests) before
// removing all of them, and the sweeping pass keeps the admission while
// the host of any is held; later passes read only the recorded one. The
// first in the RequestFinder's listing need not be the Machine's: here a
// request of u9's (another Machine deleted long ago, whose host h3 the
// reboot controller holds off for it, and powers on once it is removed)
// is listed before m0's own
// (u0) on h1, which the reboot controller powered off and whose BMC
// refuses the power-on (the fault kept on). The sweep records h3's
// request as m0's, removes both, keeps the admission for h1 in that pass;
// once h3 is on again the next pass reads h3 only (not held) and releases
// m0's admission while h1 is still off for m0's request. m2 is then
// admitted under MaxCount(1) and powers h2 off: two hosts off at once by
// ground truth.
func TestReview40_OrphanSweepRecordsOtherOrphan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h3", "h1", "h2"}, remediation.State{}, "h2")
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = []string{"m0"}, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	// h3: u9's old request; the reboot controller powers h3 off for it
	// (and on again once it is removed).
	require.NoError(t, g.hosts.Mutate("h3", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u9", t0.Add(-time.Hour))}
	}))
	require.Eventually(t, func() bool { return !g.hw["h3"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h3 off for u9's request")
	// h1: m0's request, powered off for it, its BMC refusing the power-on.
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
	g.rem.Hosts = &findingHosts{RebootAPIHosts: rh, hosts: g.hosts, names: []string{"h3", "h1", "h2"}}
	_, err := g.rem.Reconcile(ctx, "m0")
	t.Logf("m0's sweeping pass: %v", err)
	a, _ = g.c.GetAdmissions(ctx)
	require.True(t, a.Has("m0"), "precondition: the sweeping pass keeps m0's admission (h1 held)")
	t.Logf("recorded for m0: %+v", a.Requests["m0"])

	from := time.Now()
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	for i := 0; i < 20 && !g.hw["h2"].WasOffDuring(from, time.Now()); i++ {
		if _, err := g.rem.Reconcile(ctx, "m0"); err != nil {
			t.Logf("m0's pass: %v", err)
		}
		g.pass(t, "m2")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ = g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m0's swept request, truth %v) and h2 (m2's, truth %v) both off at once; the sweep recorded u9's request on h3 as m0's (%+v) and a later pass released m0 on it; admissions %v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), a.Requests["m0"], a.Machines)
	}
}

// TestReview40_StrayWithFutureTReadAfterItsPowerOff: round 21 sets a
// stray's sighting to "no later than the T its value carries"
// (phased.go decide: StraySeen = now, or Host.RequestT if before now).
// A value whose T is later than this pass's clock (written by a replica
// whose clock runs ahead, here 5 s: the leader moved to another node) is
// ignored: StraySeen = now, after the reboot controller powered the host
// off for that request. Once the pass removes it, nothing read is "after
// the request" (LastRequest's T = StraySeen): the next pass forgets the
// sighting and releases m1's admission while h1 is off for m1's own
// request (its BMC refusing the power-on, the fault kept on), and m2 is
// admitted under MaxCount(1): two hosts off at once by ground truth. The
// round-21 finding (TestReview40_LostStateStrayReadAfterItsPowerOff)
// again, with a T from a clock that is ahead: a T that is not in the past
// says nothing of when the request was written, so it may not make the
// sighting later than what is known (the last attempt's end, or never
// remediated: any power-off since the host was last known on).
func TestReview40_StrayWithFutureTReadAfterItsPowerOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h1", "h2"}, remediation.State{}, "h2")
	g.hostOf["m1"] = "h1"
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = nil, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	refuseOn(g.hw["h1"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t0.Add(5*time.Second))}
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
		t.Fatalf("MaxCount(1): h1 (off for m1's own request, truth %v) and h2 (m2's, truth %v) both off at once; the sighting (straySeen %v) was taken at the pass's clock, after the power-off, as the request's T was ahead of it; admissions %v",
			g.hw["h1"].Truth(), g.hw["h2"].Truth(), rec.State.StraySeen, a.Machines)
	}
}

// failOnceHosts fails the first removal of a request from host fail.
type failOnceHosts struct {
	*findingHosts
	fail   string
	failed bool
}

func (h *failOnceHosts) RemoveRebootRequest(ctx context.Context, machine string, req remediation.Request) error {
	if req.Host == h.fail && !h.failed {
		h.failed = true
		return fmt.Errorf("host %s: the object has been modified; please apply your changes to the latest version and try again", req.Host)
	}
	return h.findingHosts.RemoveRebootRequest(ctx, machine, req)
}

// TestReview40_OrphanSweepInterruptedLeavesRequest: round 21's sweep
// (reconciler.go removeOrphans) records the first request no Machine
// owns as the gone Machine's (Admissions.Requests) and then removes them
// one by one; an error on any removal (a write conflict here; or the
// Guard's live check failing between two removals) returns with the
// others still on their hosts. The next pass finds a recorded request,
// so it no longer sweeps (releaseRecorded sweeps only "req.Host == """):
// it removes the recorded one only, and releases the admission once that
// host is on. m0's own request (u0) on h1 is never removed: the reboot
// controller holds h1 off for it for good, counted by no admission.
// Before round 21 the next pass swept again (no request recorded).
func TestReview40_OrphanSweepInterruptedLeavesRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h3", "h1", "h2"}, remediation.State{}, "h2")
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = []string{"m0"}, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	require.NoError(t, g.hosts.Mutate("h3", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u9", t0.Add(-time.Hour))}
	}))
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u0", t0)}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() && !g.hw["h3"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1, h3 off for their requests")
	rh := g.rem.Hosts.(*remediation.RebootAPIHosts)
	rh.HostOf = func(_ context.Context, m string) (string, error) {
		if m == "m0" {
			return "", fmt.Errorf("%s: %w", m, remediation.ErrNotFound)
		}
		return g.hostOf[m], nil
	}
	g.rem.Hosts = &failOnceHosts{findingHosts: &findingHosts{RebootAPIHosts: rh, hosts: g.hosts, names: []string{"h3", "h1", "h2"}}, fail: "h1"}
	released := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, err := g.rem.Reconcile(ctx, "m0")
		t.Logf("m0's pass: %v", err)
		if a, _ = g.c.GetAdmissions(ctx); !a.Has("m0") {
			released = true
			break
		}
	}
	require.True(t, released, "precondition: m0's admission released in the end")
	time.Sleep(300 * time.Millisecond)
	h1, _ := g.hosts.Get(ctx, "h1")
	if v, ok := h1.Annotations[remediation.RebootAnnotation]; ok && !g.hw["h1"].HardwareOn() {
		t.Fatalf("m0's admission released with its own request still on h1 (%s), which the reboot controller holds off for it for good (truth %v), counted by no admission (%v)",
			v, g.hw["h1"].Truth(), a.Machines)
	}
}

// TestReview40_OrphanSweepTakesAnotherGoneMachinesRequest: two gone
// Machines, m0 and m9, admitted by records written before
// Admissions.Requests existed (no request, no Member), their hosts no
// longer resolved; each one's request is on a host the reboot controller
// powered off for it, whose BMC refuses the power-on (fault kept on). m0's
// sweep (reconciler.go removeOrphans) removes every request no Machine
// owns, m9's on h3 included, records only one (its own, on h1) and keeps
// only its own admission for it. m9's pass then finds nothing to sweep
// and no host held through its (empty) recorded request: m9's admission
// is released at once while h3 is off for m9's own request (doc.go: "a
// host that may carry its request is never let go"): two hosts off for
// remediations, one admission counting them.
func TestReview40_OrphanSweepTakesAnotherGoneMachinesRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	g := newRig40q(t, []string{"h1", "h3", "h2"}, remediation.State{}, "h2")
	a, _ := g.c.GetAdmissions(ctx)
	a.Machines, a.Requests, a.Members = []string{"m0", "m9"}, nil, nil
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	refuseOn(g.hw["h1"])
	refuseOn(g.hw["h3"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u0", t0)}
	}))
	require.NoError(t, g.hosts.Mutate("h3", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u9", t0)}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() && !g.hw["h3"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1, h3 off for m0's and m9's requests")
	rh := g.rem.Hosts.(*remediation.RebootAPIHosts)
	rh.HostOf = func(_ context.Context, m string) (string, error) {
		if m == "m0" || m == "m9" {
			return "", fmt.Errorf("%s: %w", m, remediation.ErrNotFound)
		}
		return g.hostOf[m], nil
	}
	g.rem.Hosts = &findingHosts{RebootAPIHosts: rh, hosts: g.hosts, names: []string{"h1", "h3", "h2"}}
	from := time.Now()
	for i := 0; i < 5; i++ {
		for _, m := range []string{"m0", "m9"} {
			_, err := g.rem.Reconcile(ctx, m)
			t.Logf("%s's pass: %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	a, _ = g.c.GetAdmissions(ctx)
	if !a.Has("m9") && g.hw["h3"].OffThroughout(from, to) {
		t.Fatalf("m9's admission released while h3 is off for m9's own request (truth %v), swept by m0's pass; admissions %v, requests %v",
			g.hw["h3"].Truth(), a.Machines, a.Requests)
	}
}
