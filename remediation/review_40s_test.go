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

// TestReview40_LegacyPrevHostReusedFailsRetry: the round-18 fix takes a
// State of the earlier format (PrevHost without PrevHostSince) as "a
// request of the Machine's found on PrevHost at the last request's time"
// (phased.go decide/movedFrom: PrevHostSeen = PrevHostSince), and newly
// forbids a retry while PrevHost may be off "for a request of the
// machine's found there" (retryOrEscalate: prevOffHost, giveUp). m1
// moved from h1 to h2 under the earlier version; h1 is then re-used: m3's
// remediation powers it off after m1's request (its BMC slow to power it
// on). No request of m1's was ever on h1 since the move, but PrevHostOff
// reads any power-off after that time (offFor: held, RebootPending and
// OffAfterRequest are the host's, whoever asked). m1's attempt on h2
// times out (its Node does not come back) and, instead of its retry
// (RetryLimit 1), the remediation fails blaming h1 ("may still be off for
// a request of the machine's found there"), a Machine with an owner
// deleted for another Machine's reboot; the earlier version retried.
func TestReview40_LegacyPrevHostReusedFailsRetry(t *testing.T) {
	t1 := time.Now()
	// As the earlier version persisted it: PrevHost only.
	g := newRig40q(t, []string{"h1", "h2", "h4"},
		remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1"}, "h4")
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1)}
	}))
	// h1 re-used by m3 (another Machine, UID u3): its request powers h1
	// off; h1's BMC refuses the power-on for now.
	refuseOn(g.hw["h1"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u3", time.Now())}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 off for m3's request")
	var s remediation.State
	for end := time.Now().Add(g.rem.Config.Timeout + 4*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if s.Attempt == 2 || s.Phase == remediation.PhaseFailed {
			break
		}
	}
	h1, err := g.hosts.Get(context.Background(), "h1")
	require.NoError(t, err)
	require.NotContains(t, h1.Annotations[remediation.RebootAnnotation], `"u1"`, "precondition: no request of m1's on h1")
	if s.Phase == remediation.PhaseFailed && strings.Contains(s.Message, "host h1") {
		t.Fatalf("m1's remediation failed instead of retrying (attempt %d): %q; h1 is off for m3's request only (annotation %q), never for one of m1's",
			s.Attempt, s.Message, h1.Annotations[remediation.RebootAnnotation])
	}
	require.Equal(t, 2, s.Attempt, "m1 retries on h2 (RetryLimit 1)")
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

// TestReview40_OldControllerRewriteForgetsEarlierHost: the round-18 doc
// says a State or Member "rewritten by a controller of that version
// during a rolling upgrade, dropping the fields it does not know" keeps
// its moved-from host counted (PrevHost taken as seen). That covers
// PrevHost only: the same rewrite drops EarlierHosts (and StraySeen)
// entirely. m1 moved h1 -> h2 -> h3; a stray of m1's found on h1
// (EarlierHosts, Seen) powered it off and h1's BMC refuses the power-on,
// so m1's admission is kept. A controller of the earlier version, sharing
// the records during the upgrade, writes m1's State and Member back with
// PrevHost h2 only. The next pass of this version reads h2 (on: not
// off), never h1, and releases m1's admission while h1 is off for m1's
// request, by the BMC's own reading: the storm guard counts one host
// fewer than are off.
func TestReview40_OldControllerRewriteForgetsEarlierHost(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		ctx := context.Background()
		t0 := time.Now().Add(-time.Hour)
		c := fake.NewCluster()
		c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
		c.PutNode(remediation.Node{Name: "m1", UID: "n1b", Ready: true})
		hw := map[string]*fake.Power{}
		for _, h := range []string{"h1", "h2", "h3"} {
			hw[h] = fake.NewPower(time.Now, fake.PowerConfig{})
		}
		require.NoError(t, hw["h1"].Off(ctx, power.ModeHard))
		refuseOn(hw["h1"])
		require.False(t, hw["h1"].HardwareOn(), "precondition: h1 off")
		hosts := fake.NewRebootHosts(
			// h1: off for m1's stray request (found and removed), power-on
			// recorded but refused.
			reboot.Host{Name: "h1", Online: true, Status: reboot.Status{PendingRebootSince: t0.Add(20 * time.Minute), LastPoweredOff: t0.Add(21 * time.Minute), LastPoweredOn: t0.Add(22 * time.Minute)}},
			// h2: m1 moved from it, never off since.
			reboot.Host{Name: "h2", Online: true},
			// h3: m1's own request, served and confirmed on.
			reboot.Host{Name: "h3", Online: true, Status: reboot.Status{LastPoweredOff: t0.Add(11 * time.Minute), LastPoweredOn: t0.Add(12 * time.Minute), OnConfirmed: t0.Add(12 * time.Minute)}})
		rec, err := c.Get(ctx, "m1")
		require.NoError(t, err)
		tr := t0.Add(10 * time.Minute)
		st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: tr, Host: "h3", Finished: t0.Add(15 * time.Minute),
			PrevHost: "h2", PrevHostSince: tr,
			EarlierHosts: []remediation.MovedFrom{{Host: "h1", Since: t0.Add(5 * time.Minute), Seen: t0.Add(20 * time.Minute)}}}
		mem := remediation.Member{Cluster: "c", Wrote: true, PrevHost: "h2", PrevHostSince: tr, EarlierHosts: st.EarlierHosts}
		if rewrite {
			// A controller of the earlier version wrote the records back
			// with the fields it knows.
			st = remediation.State{Phase: st.Phase, Attempt: st.Attempt, Started: st.Started, RequestedAt: st.RequestedAt, Host: st.Host, PrevHost: st.PrevHost, Finished: st.Finished}
			mem = remediation.Member{Cluster: "c", Wrote: true, PrevHost: "h2"}
		}
		require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
		a, _ := c.GetAdmissions(ctx)
		a.Machines = []string{"m1"}
		a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", tr), At: tr, Host: "h3"}}
		a.Members = map[string]remediation.Member{"m1": mem}
		require.NoError(t, c.PutAdmissions(ctx, a))
		r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
			Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
				Power:  func(h string) (power.Controller, error) { return hw[h], nil },
				HostOf: func(context.Context, string) (string, error) { return "h3", nil }}}
		for i := 0; i < 3; i++ {
			res, err := r.Reconcile(ctx, "m1")
			a, _ := c.GetAdmissions(ctx)
			t.Logf("rewrite %v pass %d: err %v reason %q admitted %v", rewrite, i, err, res.Decision.Reason, a.Machines)
			if !a.Has("m1") && !hw["h1"].HardwareOn() {
				rec, _ := c.Get(ctx, "m1")
				if !rewrite {
					t.Fatalf("precondition: without the rewrite this version keeps m1's admission while h1 is off (pass %d, err %v)", i, err)
				}
				t.Fatalf("pass %d after the earlier version's rewrite: m1's admission released (err %v; state prev %q earlier %+v) while h1, off for m1's stray request, is off (truth %v)",
					i, err, rec.State.PrevHost, rec.State.EarlierHosts, hw["h1"].Truth())
			}
		}
	}
}
