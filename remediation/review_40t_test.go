package remediation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
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
	t.Parallel()
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

// lostGuard is a leadership Guard whose leader loses its lease once lose
// is called (a pause past the lease): every Hold after that is refused.
type lostGuard struct {
	mu    sync.Mutex
	lost  bool
	holds int
}

func (g *lostGuard) lose() { g.mu.Lock(); g.lost = true; g.mu.Unlock() }

func (g *lostGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost {
		return nil, nil, reboot.ErrNotLeader
	}
	g.holds++
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

// findingHosts is RebootAPIHosts that is also a RequestFinder over the
// fake hosts names (as the kube module's store is).
type findingHosts struct {
	*remediation.RebootAPIHosts
	hosts *fake.RebootHosts
	names []string
}

func (h *findingHosts) RebootRequests(ctx context.Context) ([]remediation.Request, error) {
	var out []remediation.Request
	for _, n := range h.names {
		x, err := h.hosts.Get(ctx, n)
		if err != nil {
			return nil, err
		}
		if v, ok := x.Annotations[remediation.RebootAnnotation]; ok {
			out = append(out, remediation.Request{Value: v, Host: n})
		}
	}
	return out, nil
}

// TestReview40_RemoveOrphansUnguarded: Reconciler.Guard "fences every
// write (Machines, Nodes, hosts' annotations, admissions) by this
// process's leadership ... a refused pass returns an error wrapping
// reboot.ErrNotLeader and acts no more" (issue 40 point 3: a Guard before
// every write). The abandon of a gone Machine admitted by an old record
// (no Admissions.Requests) whose host HostOf no longer resolves removes
// the requests no listed Machine owns (reconciler.go releaseRecorded ->
// removeOrphans), but removeOrphans runs outside reboot.Fenced and never
// checks the Guard: a leader that lost its lease while it read (here in
// HostOf, inside its first fenced call) goes on to list Machines and
// remove reboot requests from hosts. Its listing is stale: a request a
// new leader wrote since, for a Machine created since, is one "no
// Machine owns" to it, and is removed under the new leader's feet (the
// reboot controller powers that host on while the new leader, on its
// Fenced evidence, deletes the Node).
func TestReview40_RemoveOrphansUnguarded(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	c := fake.NewCluster()
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u9", t0)}})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m0"} // an old record: no Requests, no Members
	require.NoError(t, c.PutAdmissions(ctx, a))
	g := &lostGuard{}
	hs := &findingHosts{hosts: hosts, names: []string{"h1"}, RebootAPIHosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
		HostOf: func(context.Context, string) (string, error) {
			g.lose() // the leader pauses here past its lease
			return "", fmt.Errorf("m0: %w", remediation.ErrNotFound)
		}}}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Hosts: hs, Now: time.Now, Guard: g,
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond}}
	_, err := r.Reconcile(ctx, "m0")
	t.Logf("pass: %v (holds granted %d)", err, g.holds)
	h1, err2 := hosts.Get(ctx, "h1")
	require.NoError(t, err2)
	if _, ok := h1.Annotations[remediation.RebootAnnotation]; !ok {
		t.Fatalf("a leader that lost its lease removed the reboot request on h1 (removeOrphans runs outside the Guard); pass error %v", err)
	}
}

// TestReview40_NeverRemediatedTakesOthersRequestAsStray: round 19 records
// a request found on the host of a Machine in PhaseNone as the Machine's
// own stray (phased.go, PhaseNone/Done/Failed case: StraySeen set for
// every phase now) and admits it for it (ownStray). But PhaseNone with no
// StraySeen reads its host for the zero Request (held.go LastRequest),
// and RebootAPIHosts takes any value as the Machine's when the request
// names none (SameMachine: "an empty want matches any value"). So a
// Machine that was never remediated, on a host re-used from m0 (deleted
// mid-remediation, its request still there, its admission kept while
// abandon removes it), takes m0's request as a stray of its own: its
// State says "its own host, may be off for a request of the machine's
// found there after the remediation ended", and it is admitted: one host
// off counted twice by the storm guard (m2 refused under MaxCount(2)
// while one host is off). Doc: "Only this Machine's request is removed,
// or counts as its own (a value naming its UID)".
func TestReview40_NeverRemediatedTakesOthersRequestAsStray(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "m2", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	m0req := remediation.Request{Value: remediation.RebootValue("u0", t0), At: t0, Host: "h1"}
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: m0req.Value}},
		reboot.Host{Name: "h2", Online: true})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m0"}
	a.Requests = map[string]remediation.Request{"m0": m0req}
	a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true}}
	require.NoError(t, c.PutAdmissions(ctx, a))
	hostOf := map[string]string{"m1": "h1", "m2": "h2"}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
			HostOf: func(_ context.Context, m string) (string, error) { return hostOf[m], nil }},
		Limit: remediation.MaxCount(2), Config: remediation.Config{PollInterval: 50 * time.Millisecond}}
	for i := 0; i < 3; i++ {
		_, err := r.Reconcile(ctx, "m1")
		require.NoError(t, err)
	}
	rec, _ := c.Get(ctx, "m1")
	a, _ = c.GetAdmissions(ctx)
	h1, _ := hosts.Get(ctx, "h1")
	require.Equal(t, m0req.Value, h1.Annotations[remediation.RebootAnnotation], "precondition: m0's request is left on h1 (not m1's to remove)")
	c.SetNodeReady("m2", false)
	c.SetNeedsRemediation("m2", true)
	_, err := r.Reconcile(ctx, "m2")
	require.NoError(t, err)
	rec2, _ := c.Get(ctx, "m2")
	if a.Has("m1") || !rec.State.StraySeen.IsZero() {
		t.Errorf("m1, never remediated, took m0's request on h1 (value naming u0) as a stray of its own: admitted %v, state straySeen %v host %q message %q; m2 under MaxCount(2) with one host off: phase %s %q",
			a.Has("m1"), rec.State.StraySeen, rec.State.Host, rec.State.Message, rec2.State.Phase, rec2.State.Message)
	}
}
