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

// TestReview40_StrayAfterFailedClearedNotCounted: the round-18 fix
// (State.StraySeen) claims "a request of the Machine's found on its own
// host after its remediation ended (done or failed) is recorded likewise
// ... and the Machine keeps its admission, or is admitted again, while
// that host may be off for it". A failed remediation whose Machine is
// healthy again is cleared to PhaseNone (phased.go: "failed remediation
// cleared"), keeping Host h2. A paused writer's stale request of m1's
// (attempt 1's) then lands on h2 and the reboot controller powers h2 off;
// h2's BMC refuses the power-on. The pass over m1 finds the request
// (PhaseNone reads HostOf's host, and SameMachine with an empty want
// matches it) and removes it, but records nothing: StraySeen is set only
// for st.Phase != PhaseNone (phased.go, the PhaseNone/Done/Failed case),
// and ownStray drops it for PhaseNone anyway. m1 is never counted: m2 is
// admitted under MaxCount(1) and powers h3 off while h2 is off for m1's
// request, by ground truth.
func TestReview40_StrayAfterFailedClearedNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t1 := time.Now().Add(-time.Minute)
	g := newRig40q(t, []string{"h2", "h3"},
		remediation.State{Phase: remediation.PhaseFailed, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", Finished: t1.Add(30 * time.Second),
			Message: "node not back in time: retries exhausted, remediation failed"}, "h3")
	// The Machine is healthy again (fixed by hand): the failure is cleared.
	g.c.SetNeedsRemediation("m1", false)
	g.c.SetNodeReady("m1", true)
	var s remediation.State
	for i := 0; i < 5; i++ {
		s = g.pass(t, "m1")
		time.Sleep(20 * time.Millisecond)
	}
	a, _ := g.c.GetAdmissions(ctx)
	require.Equal(t, remediation.PhaseNone, s.Phase, "precondition: m1's failed remediation cleared")
	require.Equal(t, "h2", s.Host, "precondition: the cleared state keeps its host")
	require.False(t, a.Has("m1"), "precondition: m1's admission released")
	require.True(t, g.hw["h2"].HardwareOn(), "precondition: h2 on")

	// A stale request of m1's (attempt 1's writer, paused) lands on h2.
	g.strayOn(t, "h2")
	for i := 0; i < 5; i++ {
		g.pass(t, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	h2, err := g.hosts.Get(ctx, "h2")
	require.NoError(t, err)
	require.NotContains(t, h2.Annotations, remediation.RebootAnnotation, "precondition: a pass of m1 found its stale request on h2 and removed it")
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
		rec, _ := g.c.Get(ctx, "m1")
		t.Fatalf("MaxCount(1): h2 (off for m1's stale request, which a pass of m1 found and removed: state phase %s straySeen %v; truth %v) and h3 (m2's, truth %v) both off at once; admissions %v",
			rec.State.Phase, rec.State.StraySeen, g.hw["h2"].Truth(), g.hw["h3"].Truth(), a.Machines)
	}
}

// TestReview40_StrayAdmissionOutlivesStrayAndBypassesGuard: the round-18
// fix re-admits a finished Machine whose own host is off for a stale
// request of its (ownStray, "an admission kept only for that admits no
// new attempt": start and Reconcile judge it by the storm guard while
// State.StraySeen is set). But once the host is on again, ownStray
// forgets StraySeen and returns without releasing the admission when the
// Machine is unhealthy (phased.go ownStray: the !strayOff branch clears
// StraySeen only; start, waiting for the storm guard, never sets
// Release). The admission taken for the stray now reads as the Machine's
// own: the next pass skips the storm guard (reconciler.go: MayStart is
// computed only for !o.Admitted || stray; start: admitted) and power-
// cycles its host while m2, admitted within MaxCount(1), has its host
// off: two hosts off at once by two remediations, by ground truth.
func TestReview40_StrayAdmissionOutlivesStrayAndBypassesGuard(t *testing.T) {
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

	// m2 is admitted (MaxCount(1), m1 over) and its host h3 stays off:
	// its BMC refuses the power-on, m2's remediation stays in flight.
	refuseOn(g.hw["h3"])
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	require.Eventually(t, func() bool { g.pass(t, "m2"); return !g.hw["h3"].HardwareOn() }, 10*time.Second, 50*time.Millisecond, "precondition: m2's remediation powered h3 off")

	// A stale request of m1's lands on h2: h2 off, m1 re-admitted for it.
	g.strayOn(t, "h2")
	for i := 0; i < 3; i++ {
		g.pass(t, "m1")
		time.Sleep(30 * time.Millisecond)
	}
	a, _ = g.c.GetAdmissions(ctx)
	require.True(t, a.Has("m1"), "precondition: m1 re-admitted while h2 is off for its stale request")

	// m1 unhealthy again: it waits for the storm guard (m2 in flight).
	g.c.SetNodeReady("m1", false)
	g.c.SetNeedsRemediation("m1", true)
	s = g.pass(t, "m1")
	s = g.pass(t, "m1")
	require.Contains(t, s.Message, "storm guard", "precondition: m1's new attempt waits for the storm guard")

	// h2's BMC recovers: the reboot controller powers it on.
	g.hw["h2"].SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond})
	require.Eventually(t, func() bool { return g.hw["h2"].HardwareOn() }, 15*time.Second, 10*time.Millisecond, "precondition: h2 on again")
	require.True(t, g.hw["h3"].OffThroughout(t1, time.Now()) || !g.hw["h3"].HardwareOn(), "precondition: h3 still off")

	from := time.Now()
	for i := 0; i < 20; i++ {
		s = g.pass(t, "m1")
		g.pass(t, "m2")
		if g.hw["h2"].WasOffDuring(from, time.Now()) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	if g.hw["h3"].OffThroughout(from, to) && g.hw["h2"].WasOffDuring(from, to) {
		a, _ := g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): m1 started attempt %d (phase %s) past the storm guard on the admission taken for its stale request, while m2's remediation holds h3 off: h2 truth %v, h3 truth %v; admissions %v",
			s.Attempt, s.Phase, g.hw["h2"].Truth(), g.hw["h3"].Truth(), a.Machines)
	}
}

// raceAdd is RebootAPIHosts whose AddRebootAnnotation first lets before
// run (the reboot controller acting on another host meanwhile).
type raceAdd struct {
	*remediation.RebootAPIHosts
	before func()
}

func (h *raceAdd) AddRebootAnnotation(ctx context.Context, m string, req remediation.Request) error {
	if h.before != nil {
		h.before()
	}
	return h.RebootAPIHosts.AddRebootAnnotation(ctx, m, req)
}

// TestReview40_PassFindingFreshStrayWritesElsewhere: the round-18 fix
// says "the pass that first finds a stray on a host moved from writes no
// request elsewhere (readPrev counts it as seen)". But readPrev counts
// it only if the host is already off for it (reconciler.go readPrev: Off
// is seen && offFor(h)): a stray of m1's on h1 that the reboot controller
// has not acted on yet reads not off, and the pass writes m1's request to
// h3, its new host (PhasePowerOffRequested, moved: request), before it
// removes the stray from h1 (its steps add the request first, remove the
// one on the host moved from later). The reboot controller takes h1's
// request in between and powers h1 off (its BMC refusing the power-on),
// and then h3 off for the new request: two hosts off at once for one
// Machine's remediation under MaxCount(1), by ground truth. A request of
// the Machine's found on a host it moved from must block writing
// elsewhere in that pass whether or not the host reads off yet.
func TestReview40_PassFindingFreshStrayWritesElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t1 := time.Now().Add(-time.Minute)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: false})
	c.SetNeedsRemediation("m1", true)
	hw := map[string]*fake.Power{}
	for _, h := range []string{"h1", "h2", "h3"} {
		hw[h] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	}
	refuseOn(hw["h1"])
	// A paused writer's request of m1's has just landed on h1, the host m1
	// moved from; the reboot controller has not acted on it yet.
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1.Add(-time.Hour))}},
		reboot.Host{Name: "h2", Online: true},
		reboot.Host{Name: "h3", Online: true})
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: func(h string) (power.Controller, error) { return hw[h], nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	drive := func(h string) {
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && hw[h].HardwareOn(); time.Sleep(10 * time.Millisecond) {
			_, _ = rb.Reconcile(ctx, h)
		}
	}
	rec, err := c.Get(ctx, "m1")
	require.NoError(t, err)
	// Attempt 1's request on h2 was released for the move to h3, h2 never
	// powered off for it: the move is not blocked by h2.
	st := remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1", PrevHostSince: t1}
	require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t1), At: t1, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t1}}
	require.NoError(t, c.PutAdmissions(ctx, a))
	from := time.Now()
	hs := &raceAdd{RebootAPIHosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
		HostOf: func(context.Context, string) (string, error) { return "h3", nil }}}
	// The reboot controller acts on h1's request while the pass runs.
	hs.before = func() { drive("h1") }
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Hosts: hs,
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Hour}}
	_, err = r.Reconcile(ctx, "m1")
	require.NoError(t, err)
	rec, _ = c.Get(ctx, "m1")
	h1, _ := hosts.Get(ctx, "h1")
	require.NotContains(t, h1.Annotations, remediation.RebootAnnotation, "precondition: the pass removed m1's request from h1")
	drive("h3") // the reboot controller serves what the pass wrote there
	to := time.Now()
	if hw["h1"].WasOffDuring(from, to) && hw["h3"].WasOffDuring(from, to) && !hw["h1"].HardwareOn() && !hw["h3"].HardwareOn() {
		t.Fatalf("one Machine, two hosts off at once: h1 (m1's stray request, found by the pass: prev %s, earlier %+v) and h3 (m1's request written by the same pass: state host %s, %q): truth h1 %v, h3 %v",
			rec.State.PrevHost, rec.State.EarlierHosts, rec.State.Host, rec.State.Message, hw["h1"].Truth(), hw["h3"].Truth())
	}
}
