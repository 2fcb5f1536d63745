package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_UpgradedMemberReleasesWhilePrevHostOff: the admission
// record an earlier version wrote for a Machine that moved from h1 to h2
// holds Member{PrevHost: h1} only (no PrevHostSince, no PrevHostSeen:
// that version removed a request of the Machine's found on h1 without
// recording it). The Machine is deleted while h1 is off after its
// request and never on since: the very fixture of
// TestGoneMovedMachineKeepsAdmissionWhilePrevHostOff before review 40q
// rewrote it. The earlier version kept the admission (stillHeld on h1,
// read for the recorded request's time); this one reads PrevHostSeen
// zero as "no request of its ever found there" (reconciler.go
// readMembersPrev: off needs Seen set) and releases the admission at
// once while h1 is off: across the upgrade the storm guard counts one
// host fewer than are off.
func TestReview40_UpgradedMemberReleasesWhilePrevHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster() // m1 is gone: never added
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), PendingRebootSince: t0.Add(30 * time.Second)}},
		reboot.Host{Name: "h2", Online: true})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("uid-m1", t0), At: t0, Host: "h2"}}
	// As an earlier version wrote it (and as an earlier controller
	// sharing the record during a rolling upgrade writes it back: its
	// Member has no other field).
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	require.NoError(t, c.PutAdmissions(ctx, a))
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostsMayVanish: true,
			HostOf: func(context.Context, string) (string, error) { return "", remediation.ErrNotFound }}}
	for i := 0; i < 2; i++ {
		_, err := r.Reconcile(ctx, "m1")
		if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
			t.Fatalf("pass %d: gone m1's admission (recorded by an earlier version: Member{PrevHost: h1}) released (err %v) while h1, the host it moved from, has been off since after its request and not on since; the earlier version kept it", i, err)
		}
	}
}

// TestReview40_UpgradedStateForgetsPrevHostOff: a State an earlier
// version persisted (PrevHost h1, no PrevHostSince, no PrevHostSeen)
// for a remediation that is over, whose Machine moved from h1 to h2:
// a stray request of the Machine's landed on h1, powered it off, and the
// earlier version removed it (removeRequest took any value naming the
// UID off PrevHost, recording nothing); h1's BMC refuses the power-on,
// so h1 is off since then. The earlier version kept the admission
// (PrevHostOff: off after the last request's time). This one fills
// PrevHostSince from the last request's time but reads PrevHostSeen zero
// as "none found" (reconciler.go readPrev: Off needs Seen set), forgets
// h1 and releases the admission on the first pass after the upgrade
// while h1 is off: the storm guard counts one host fewer than are off.
func TestReview40_UpgradedStateForgetsPrevHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1b", Ready: true})
	hosts := fake.NewRebootHosts(
		// h1: off for m1's stray request (removed since), power-on recorded
		// but refused (never confirmed).
		reboot.Host{Name: "h1", Online: true, Status: reboot.Status{PendingRebootSince: t0.Add(20 * time.Minute), LastPoweredOff: t0.Add(21 * time.Minute), LastPoweredOn: t0.Add(22 * time.Minute)}},
		// h2: m1's own request, served and confirmed on.
		reboot.Host{Name: "h2", Online: true, Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), LastPoweredOn: t0.Add(2 * time.Minute), OnConfirmed: t0.Add(2 * time.Minute)}})
	rec, err := c.Get(ctx, "m1")
	require.NoError(t, err)
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(5 * time.Minute)}
	require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t0), At: t0, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	require.NoError(t, c.PutAdmissions(ctx, a))
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
			HostOf: func(context.Context, string) (string, error) { return "h2", nil }}}
	for i := 0; i < 2; i++ {
		_, err := r.Reconcile(ctx, "m1")
		rec, _ := c.Get(ctx, "m1")
		if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
			t.Fatalf("pass %d: m1's admission released (err %v, state prev=%q since=%v seen=%v msg=%q) while h1, the host it moved from, has been off since a stray request of m1's after its last request and not on since; the earlier version that persisted this state kept it",
				i, err, rec.State.PrevHost, rec.State.PrevHostSince, rec.State.PrevHostSeen, rec.State.Message)
		}
	}
}

// TestReview40_RetryPowersOffWhilePrevHostOffForStray: the fix's own
// weakness (1), by ground truth. m1 moved from h1 to h2; a stray request
// of m1's lands on h1, a pass finds it (PrevHostSeen) and removes it, but
// h1's BMC refuses the power-on: h1 stays off for m1's request (Observed.
// PrevHostOff true on every pass). m1's attempt 1 on h2 powers h2 off and
// on again; its Node does not come back in time, and retryOrEscalate
// retries on h2 at once (phased.go: the retry never consults
// prevOffHost; only start does), powering h2 off a second time while h1
// is still off for m1: two hosts off at once by one Machine's remediation
// under MaxCount(1), and the second power-off was this controller's own
// choice, taken while it knew h1 off (the same wait a new attempt makes,
// waitOverMoved, is skipped). A retry (or a move) must wait for the hosts
// the Machine moved from, as a new attempt does, and fail naming them at
// its timeout.
func TestReview40_RetryPowersOffWhilePrevHostOffForStray(t *testing.T) {
	t.Parallel()
	t1 := time.Now()
	g := newRig40q(t, []string{"h1", "h2", "h3"},
		remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1", PrevHostSince: t1}, "h3")
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1)}
	}))
	g.strayOn(t, "h1")
	s := g.pass(t, "m1")
	require.False(t, s.PrevHostSeen.IsZero(), "precondition: the pass found m1's stray request on h1")
	// Attempt 1 runs on h2 (its Node never comes back) until h2 is on
	// again after its power cycle.
	var from time.Time
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if s.Attempt == 1 && (s.Phase == remediation.PhasePoweringOn || s.Phase == remediation.PhaseWaitingForNode) && g.hw["h2"].HardwareOn() && !g.hw["h2"].WasOffDuring(time.Now().Add(-10*time.Millisecond), time.Now()) {
			from = time.Now()
			break
		}
	}
	require.False(t, from.IsZero(), "precondition: attempt 1 power-cycled h2 and h2 is on again")
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 off for m1's stray request (its BMC refuses the power-on)")
	retried := false
	for end := time.Now().Add(g.rem.Config.Timeout + 3*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if s.Attempt == 2 {
			retried = true
		}
		if retried && g.hw["h2"].WasOffDuring(from, time.Now()) || s.Phase == remediation.PhaseFailed {
			break
		}
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request since before %v, known to the controller: PrevHostSeen %v) and h2 (powered off again by m1's retry, attempt %d, phase %s) both off at once: truth h1 %v, h2 %v",
			from, s.PrevHostSeen, s.Attempt, s.Phase, g.hw["h1"].Truth(), g.hw["h2"].Truth())
	}
}

// TestReview40_StrayOnFinishedOwnHostNotCounted: the fix's weakness (5),
// by ground truth. m1's remediation on h2 is done and its admission
// released. A paused writer's stale request of m1's then lands on h2
// (its own host, no Guard) and the reboot controller powers h2 off; h2's
// BMC refuses the power-on. The passes over m1 find the request on its
// last request's host and remove it (a finished remediation never leaves
// a request on a host), but m1 is never counted again: nothing records
// that h2 may be off for a request of m1's (prevHost reads only the hosts
// it moved from, and the own host's hold is judged only while an
// admission is kept: phased.go keeps/held after Release). m2 is then
// admitted under MaxCount(1) and powers h3 off while h2 is off for m1's
// request: two hosts off at once. A request of its found on its own
// host after the remediation ended must be counted as one found on a
// host it moved from is (re-admit, or keep, while the host may be off
// for it).
func TestReview40_StrayOnFinishedOwnHostNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t1 := time.Now()
	g := newRig40q(t, []string{"h2", "h3"},
		remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2"}, "h3")
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1)}
	}))
	s := g.finishM1(t, 10*time.Second)
	require.Equal(t, remediation.PhaseDone, s.Phase, "precondition: m1's remediation on h2 is done")
	for i := 0; i < 5; i++ {
		g.pass(t, "m1")
		time.Sleep(20 * time.Millisecond)
	}
	a, _ := g.c.GetAdmissions(ctx)
	require.False(t, a.Has("m1"), "precondition: m1's admission released once h2 is on")
	require.True(t, g.hw["h2"].HardwareOn(), "precondition: h2 on")

	// A stale request of m1's (attempt 1's value) lands on h2 afterwards.
	g.strayOn(t, "h2")
	for i := 0; i < 5; i++ {
		g.pass(t, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	from := time.Now()
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		g.pass(t, "m2")
		g.pass(t, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h2"].OffThroughout(from, to) && g.hw["h3"].WasOffDuring(from, to) {
		a, _ := g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h2 (off for m1's stale request that a pass of m1 found and removed: truth %v) and h3 (truth %v) both off at once; admissions %v",
			g.hw["h2"].Truth(), g.hw["h3"].Truth(), a.Machines)
	}
}

// TestReview40_MovePowersOffNewHostWhilePrevHostOffForStray: the fix's
// weakness (1) for a move. m1 moved from h1 to h2; a stray request of
// m1's found on h1 (PrevHostSeen) powered it off and h1's BMC refuses the
// power-on. m1 then moves again, to h3, mid-attempt: the move waits for
// h2 (moveBlocked) but never for h1 (phased.go: the request closure and
// movePrev go ahead; only start consults prevOffHost), so h3, a host
// that was on, is powered off while h1 is still off for m1: two hosts off
// at once under MaxCount(1), the second by this controller's own choice
// while it knew h1 off.
func TestReview40_MovePowersOffNewHostWhilePrevHostOffForStray(t *testing.T) {
	t.Parallel()
	t1 := time.Now()
	g := newRig40q(t, []string{"h1", "h2", "h3", "h4"},
		remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1", PrevHostSince: t1}, "h4")
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1)}
	}))
	g.strayOn(t, "h1")
	s := g.pass(t, "m1")
	require.False(t, s.PrevHostSeen.IsZero(), "precondition: the pass found m1's stray request on h1")
	from := time.Now()
	g.hostOf["m1"] = "h3" // m1 re-provisioned on h3
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if g.hw["h3"].WasOffDuring(from, time.Now()) || s.Phase == remediation.PhaseFailed || s.Phase == remediation.PhaseDone {
			break
		}
	}
	to := time.Now()
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h3"].WasOffDuring(from, to) {
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request, known: prev %s, earlier %+v) and h3 (m1's new host, powered off by the move's request: host %s, phase %s) both off at once: truth h1 %v, h3 %v",
			s.PrevHost, s.EarlierHosts, s.Host, s.Phase, g.hw["h1"].Truth(), g.hw["h3"].Truth())
	}
}
