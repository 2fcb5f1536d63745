package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_StrayOnOwnHostAfterFailedClearedOnMovedMachine: round 19
// (TestReview40_StrayAfterFailedClearedNotCounted's fix) records and
// counts a stray request of the Machine's found after a failed
// remediation was cleared to none, but only on "the host HostOf names"
// (held.go LastRequest: PhaseNone without StraySeen returns the zero
// Request, so the pass reads HostOf's host, not State.Host). The
// remediation failed on h2 (State.Host) and the Machine maps to h3 now
// (moved: re-provisioned): once cleared to none, a paused writer's
// request of its last attempt (RebootValue(u1, RequestedAt), written to
// State.Host h2, as the attempt's AddRebootAnnotation does) lands on h2.
// No pass of m1 ever reads h2 again: the request is never removed (the
// reboot controller holds h2 off for it for good) nor counted (m1
// released), and m2 is admitted under MaxCount(1) and powers h4 off while
// h2 is off for m1's request, by ground truth. State.Host's doc: the
// request "is read, and removed, there, whatever HostOf answers later, in
// every phase (also after the remediation ended ...)".
func TestReview40_StrayOnOwnHostAfterFailedClearedOnMovedMachine(t *testing.T) {
	ctx := context.Background()
	t1 := time.Now().Add(-time.Minute)
	g := newRig40q(t, []string{"h2", "h3", "h4"},
		remediation.State{Phase: remediation.PhaseFailed, Attempt: 2, Started: t1, RequestedAt: t1, Host: "h2", Finished: t1.Add(30 * time.Second),
			Message: "node not back in time: retries exhausted, remediation failed"}, "h4")
	// The Machine was re-provisioned onto h3 and is healthy again: its
	// failure is cleared.
	g.hostOf["m1"] = "h3"
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	var s remediation.State
	for i := 0; i < 5; i++ {
		s = g.pass(t, "m1")
		time.Sleep(20 * time.Millisecond)
	}
	a, _ := g.c.GetAdmissions(ctx)
	require.Equal(t, remediation.PhaseNone, s.Phase, "precondition: m1's failed remediation cleared")
	require.Equal(t, "h2", s.Host, "precondition: the cleared state keeps the host its last request was written to")
	require.False(t, a.Has("m1"), "precondition: m1's admission released")

	// The last attempt's paused writer lands its request on State.Host,
	// h2 (as RebootAPIHosts.AddRebootAnnotation writes to req.Host).
	refuseOn(g.hw["h2"])
	require.NoError(t, g.rem.Hosts.AddRebootAnnotation(ctx, "m1", remediation.Request{Value: remediation.RebootValue("u1", t1), At: t1, Host: "h2"}))
	require.Eventually(t, func() bool { return !g.hw["h2"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h2 powered off for m1's stale request")
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
	h2, err := g.hosts.Get(ctx, "h2")
	require.NoError(t, err)
	rec, _ := g.c.Get(ctx, "m1")
	a, _ = g.c.GetAdmissions(ctx)
	if _, left := h2.Annotations[remediation.RebootAnnotation]; left && g.hw["h2"].OffThroughout(from, to) {
		t.Errorf("h2 left off for good: m1's request is still on it after %d passes (no pass reads State.Host %s of a cleared remediation: state phase %s host %s straySeen %v; truth %v)",
			15, rec.State.Host, rec.State.Phase, rec.State.Host, rec.State.StraySeen, g.hw["h2"].Truth())
	}
	if g.hw["h2"].OffThroughout(from, to) && g.hw["h4"].WasOffDuring(from, to) {
		t.Errorf("MaxCount(1): h2 (off for m1's request, never counted) and h4 (m2's, truth %v) both off at once; admissions %v",
			g.hw["h4"].Truth(), a.Machines)
	}
}
