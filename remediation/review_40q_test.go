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

// refuseOn makes p's BMC refuse every power-on from now on (the fault
// stays on).
func refuseOn(p *fake.Power) {
	p.SetConfig(fake.PowerConfig{Lag: 20 * time.Millisecond, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn {
			return fake.Fault{Kind: fake.FaultFailed}
		}
		return fake.Fault{}
	}})
}

// TestReview40q_RetryForgetsPrevHostOffForStrayRequest: review 40p's fix
// reads State.PrevHost "for the last attempt's request time, after which
// the move found it on" (reconciler.go prevHostRequest:
// LastRequest(...).At). That premise holds only for the attempt that
// moved: a retry on the same host (retryOrEscalate, "node not back in
// time") writes a new RequestedAt and keeps PrevHost. A stray request of
// m1's that landed on PrevHost h1 during attempt 1 and powered it off
// (its BMC refusing the power-on, fault kept on) was powered off before
// attempt 2's request time, so OffAfterRequest reads false, PrevHostOff
// is false, and when attempt 2 ends PrevHost is forgotten and the
// admission released while h1 is off for m1's own request (ground
// truth): m2 powers h3 off under MaxCount(1), two hosts off at once.
func TestReview40q_RetryForgetsPrevHostOffForStrayRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: false})
	c.SetNeedsRemediation("m1", true)
	c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "m2", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true}, reboot.Host{Name: "h3", Online: true})
	hw := map[string]*fake.Power{}
	for _, h := range []string{"h1", "h2", "h3"} {
		hw[h] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	}
	pw := func(h string) (power.Controller, error) { return hw[h], nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pw,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(func(context.Context) ([]string, error) { return []string{"h1", "h2", "h3"}, nil })}}
	go func() { _ = runner.Run(rctx) }()

	// m1's attempt 1 moved from h1 to h2 (h1 known on at the move) and
	// waits for its Node; admitted, as the Reconciler records it.
	t1 := time.Now()
	rec, err := c.Get(ctx, "m1")
	require.NoError(t, err)
	st := remediation.State{Phase: remediation.PhaseWaitingForNode, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1"}
	require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
	a, err := c.GetAdmissions(ctx)
	require.NoError(t, err)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t1), At: t1, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	require.NoError(t, c.PutAdmissions(ctx, a))

	// A paused writer's request of m1's lands on h1 during attempt 1;
	// h1's BMC refuses every power-on from here on.
	refuseOn(hw["h1"])
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, hosts.Mutate("h1", func(h *reboot.Host) {
		h.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1.Add(-time.Hour))}
	}))
	require.Eventually(t, func() bool { return !hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 powered off for the stray request")

	hostOf := map[string]string{"m1": "h2", "m2": "h3"}
	rem := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, StaleReads: 100 * time.Millisecond, OwnerOnline: true,
			HostOf: func(_ context.Context, m string) (string, error) { return hostOf[m], nil }},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 1500 * time.Millisecond}}
	pass := func(m string) remediation.State {
		_, err := rem.Reconcile(ctx, m)
		rec, _ := c.Get(ctx, m)
		t.Logf("%s: err=%v phase=%s attempt=%d host=%s prev=%s msg=%q", m, err, rec.State.Phase, rec.State.Attempt, rec.State.Host, rec.State.PrevHost, rec.State.Message)
		return rec.State
	}
	// Attempt 1 times out waiting for the Node: retry 2 on h2; its Node
	// comes back once h2 is on again.
	deadline := time.Now().Add(10 * time.Second)
	retried := false
	for time.Now().Before(deadline) {
		s := pass("m1")
		retried = retried || s.Attempt == 2
		if s.Attempt == 2 && (s.Phase == remediation.PhasePoweringOn || s.Phase == remediation.PhaseWaitingForNode) && !c.Node("m1").Exists {
			c.PutNode(remediation.Node{Name: "m1", UID: "n1b", Ready: true})
		}
		if a, _ := c.GetAdmissions(ctx); !a.Has("m1") || s.Phase == remediation.PhaseDone {
			break
		}
		if s.Phase == remediation.PhaseFailed {
			// Since review 40r no retry power-cycles h2 while h1 is off
			// for m1's request found there: attempt 1 fails naming h1.
			require.Contains(t, s.Message, "host h1", "the failure names the host it waited for")
			retried = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, retried, "precondition: attempt 1 timed out (retried on h2, or failed for h1 off for m1's stray request)")
	require.False(t, hw["h1"].HardwareOn(), "precondition: h1 still off (its BMC refuses the power-on)")

	from := time.Now()
	c.SetNodeReady("m2", false)
	c.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		pass("m2")
		pass("m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	h1, _ := hosts.Get(ctx, "h1")
	t.Logf("h1 annotations=%v status=%+v", h1.Annotations, h1.Status)
	if hw["h1"].OffThroughout(from, to) && hw["h3"].WasOffDuring(from, to) {
		a, _ := c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request since attempt 1, never on since: truth %v) and h3 (truth %v) both off at once by remediation requests; m1's PrevHost was read for attempt 2's request time and forgotten; admissions now %v",
			hw["h1"].Truth(), hw["h3"].Truth(), a.Machines)
	}
}

// rig40q is three or more hosts under a running reboot controller, m1
// (admitted, its attempt on h2 after a move from h1: State.PrevHost h1)
// and m2 (healthy, on the last host), remediated under MaxCount(1).
type rig40q struct {
	c      *fake.Cluster
	hosts  *fake.RebootHosts
	hw     map[string]*fake.Power
	hostOf map[string]string
	rem    *remediation.Reconciler
}

func newRig40q(t *testing.T, names []string, st remediation.State, m2host string) *rig40q {
	t.Helper()
	ctx := context.Background()
	g := &rig40q{c: fake.NewCluster(), hw: map[string]*fake.Power{}, hostOf: map[string]string{"m1": st.Host, "m2": m2host}}
	g.c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	g.c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: false})
	g.c.SetNeedsRemediation("m1", true)
	g.c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "m2", Cluster: "c"})
	g.c.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	var hs []reboot.Host
	for _, h := range names {
		hs = append(hs, reboot.Host{Name: h, Online: true})
		g.hw[h] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	}
	g.hosts = fake.NewRebootHosts(hs...)
	rb := &reboot.Reconciler{Hosts: g.hosts, Now: time.Now, Power: func(h string) (power.Controller, error) { return g.hw[h], nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	runner := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(func(context.Context) ([]string, error) { return names, nil })}}
	go func() { _ = runner.Run(rctx) }()

	rec, err := g.c.Get(ctx, "m1")
	require.NoError(t, err)
	require.NoError(t, g.c.SaveState(ctx, "m1", rec.Version, st))
	a, err := g.c.GetAdmissions(ctx)
	require.NoError(t, err)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", st.RequestedAt), At: st.RequestedAt, Host: st.Host}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: st.PrevHost}}
	require.NoError(t, g.c.PutAdmissions(ctx, a))
	g.rem = &remediation.Reconciler{Machines: g.c, Nodes: g.c.Nodes(), Admissions: g.c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: g.hosts, Now: time.Now, StaleReads: 100 * time.Millisecond, OwnerOnline: true,
			HostOf: func(_ context.Context, m string) (string, error) { return g.hostOf[m], nil }},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 3 * time.Second}}
	return g
}

func (g *rig40q) pass(t *testing.T, m string) remediation.State {
	t.Helper()
	_, err := g.rem.Reconcile(context.Background(), m)
	rec, _ := g.c.Get(context.Background(), m)
	t.Logf("%s: err=%v phase=%s attempt=%d host=%s prev=%s msg=%q", m, err, rec.State.Phase, rec.State.Attempt, rec.State.Host, rec.State.PrevHost, rec.State.Message)
	return rec.State
}

// finishM1 runs m1's passes until its remediation is over (its Node
// brought back once its host is being powered on) or its admission goes.
func (g *rig40q) finishM1(t *testing.T, d time.Duration) remediation.State {
	t.Helper()
	var s remediation.State
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if (s.Phase == remediation.PhasePoweringOn || s.Phase == remediation.PhaseWaitingForNode) && !g.c.Node("m1").Exists {
			g.c.PutNode(remediation.Node{Name: "m1", UID: "n1b", Ready: true})
		}
		if a, _ := g.c.GetAdmissions(context.Background()); !a.Has("m1") || s.Phase == remediation.PhaseDone || s.Phase == remediation.PhaseFailed {
			break
		}
	}
	return s
}

// strayOn lands a paused writer's request of m1's (an old attempt's
// value) on h, whose BMC refuses every power-on from now on, and waits
// for the reboot controller to power h off for it.
func (g *rig40q) strayOn(t *testing.T, h string) {
	t.Helper()
	refuseOn(g.hw[h])
	require.NoError(t, g.hosts.Mutate(h, func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", time.Now().Add(-time.Hour))}
	}))
	require.Eventually(t, func() bool { return !g.hw[h].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: %s powered off for the stray request", h)
}

// TestReview40q_SecondMoveForgetsPrevHostOff: State.PrevHost is one slot.
// While h1 (PrevHost) is off for a stray request of m1's that landed
// there (its BMC refusing the power-on, fault kept on), m1 moves again
// mid-attempt, from h2 to h3: the move waits for h2 (moveBlocked) but not
// for h1 (Observed.PrevHostOff is not consulted by a move: request /
// movePrev), and movePrev replaces PrevHost h1 by h2 (and
// Member.PrevHost with it). h1 is never read again: m1's remediation on
// h3 ends, its admission is released while h1 is off for m1's own
// request (ground truth), and m2 powers h4 off under MaxCount(1).
func TestReview40q_SecondMoveForgetsPrevHostOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t1 := time.Now()
	g := newRig40q(t, []string{"h1", "h2", "h3", "h4"},
		remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1"}, "h4")
	require.NoError(t, g.hosts.Mutate("h2", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1)}
	}))
	g.strayOn(t, "h1")
	g.hostOf["m1"] = "h3" // m1 moves again (re-provisioned on h3)
	s := g.finishM1(t, 12*time.Second)
	// Since review 40r a move waits for h1 (off for m1's stray request):
	// either the attempt moved to h3 once h1 was no longer off for it, or
	// it failed at its timeout naming h1, h3 never asked.
	if s.Host != "h3" {
		require.Equal(t, remediation.PhaseFailed, s.Phase, "precondition: m1's attempt moved to h3, or failed waiting for h1")
		require.Contains(t, s.Message, "host h1", "the failure names the host it waited for")
	}
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 still off (its BMC refuses the power-on)")

	from := time.Now()
	g.c.SetNodeReady("m2", false)
	g.c.SetNeedsRemediation("m2", true)
	for i := 0; i < 10; i++ {
		g.pass(t, "m2")
		g.pass(t, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	h1, _ := g.hosts.Get(ctx, "h1")
	t.Logf("h1 annotations=%v status=%+v", h1.Annotations, h1.Status)
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h4"].WasOffDuring(from, to) {
		a, _ := g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request, never on since: truth %v) and h4 (truth %v) both off at once by remediation requests; the second move replaced PrevHost h1 while it was off; admissions now %v members %v",
			g.hw["h1"].Truth(), g.hw["h4"].Truth(), a.Machines, a.Members)
	}
}

// TestReview40q_PrevHostOffForAnotherMachineHoldsForGood: Observed.
// PrevHostOff is documented as "State.PrevHost may still be off for a
// request of this Machine's that landed there after the move", but
// prevHostRequest reads it as offFor(h) for a UID-less value: any
// power-off of PrevHost after the last request time, whoever asked for it
// (OffAfterRequest, Status.Pending() are not the Machine's). h1, which m1
// moved away from, is re-used by m3, whose remediation powers it off and
// gives up with h1's BMC refusing the power-on (m3's own admission counts
// it). No request of m1's was ever on h1 since the move. m1's attempt on
// h2 ends with its Node back and h2 on, yet m1 keeps its admission for as
// long as h1 stays off (for good here: a second count of one host), and
// when m1 is unhealthy again it waits for h1 and is escalated (failed)
// at Timeout without a single power cycle of its own host h2.
func TestReview40q_PrevHostOffForAnotherMachineHoldsForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t1 := time.Now()
	// A state of this version (PrevHostSince set, PrevHostSeen zero: no
	// request of m1's found on h1 since the move). A state of an earlier
	// version, without PrevHostSince, cannot say so: it is taken as one
	// found (review 40r, TestReview40_UpgradedStateForgetsPrevHostOff),
	// and h1 counted while it may be off.
	g := newRig40q(t, []string{"h1", "h2", "h3"},
		remediation.State{Phase: remediation.PhaseWaitingForNode, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1", PrevHostSince: t1}, "h3")
	// m3's remediation on h1 (re-used): its request powers h1 off, its
	// BMC refuses the power-on, m3 gives up and removes its request.
	refuseOn(g.hw["h1"])
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) {
		x.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u3", time.Now())}
	}))
	require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond, "precondition: h1 powered off for m3's request")
	require.NoError(t, g.hosts.Mutate("h1", func(x *reboot.Host) { delete(x.Annotations, remediation.RebootAnnotation) }))

	// m1's Node comes back: its remediation is done.
	g.c.SetNodeReady("m1", true)
	s := g.finishM1(t, 2*time.Second)
	require.Equal(t, remediation.PhaseDone, s.Phase, "precondition: m1's remediation on h2 is done")
	for i := 0; i < 10; i++ {
		g.pass(t, "m1")
		time.Sleep(50 * time.Millisecond)
	}
	a, _ := g.c.GetAdmissions(ctx)
	held := a.Has("m1")

	// m1 unhealthy again: a retry on h2, its own host, is due.
	g.c.SetNodeReady("m1", false)
	g.c.SetNeedsRemediation("m1", true)
	cycled := false
	for end := time.Now().Add(g.rem.Config.Timeout + time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s = g.pass(t, "m1")
		if s.Attempt == 2 {
			cycled = true
			break
		}
	}
	require.False(t, g.hw["h1"].HardwareOn(), "precondition: h1 still off for m3's request (its BMC refuses)")
	if held || !cycled {
		t.Fatalf("h1 is off for m3's request only (no request of m1's on it since the move): m1's admission kept after it was done: %v; m1 unhealthy again got no power cycle of h2 (phase %s, attempt %d: %q)",
			held, s.Phase, s.Attempt, s.Message)
	}
}

// TestReview40q_FailedClearedForgetsPrevHostOff: prevHostRequest reads
// State.PrevHost for LastRequest(...).At, which is zero for PhaseNone
// (held.go LastRequest), so PrevHostOff is false for a state in
// PhaseNone whatever the host. A failed remediation (its Machine moved
// from h1 to h2; no controller owner) whose Machine is healthy again is
// cleared to PhaseNone (phased.go: "failed remediation cleared") in the
// pass that finds h1 off for a stray request of m1's (admission kept,
// PrevHost kept); the next pass reads h1 for no request time, forgets
// PrevHost and releases the admission while h1 is still off for m1's own
// request (its BMC refusing the power-on, fault kept on: ground truth),
// and m2 powers h3 off under MaxCount(1).
func TestReview40q_FailedClearedForgetsPrevHostOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now().Add(-10 * time.Minute)
	g := newRig40q(t, []string{"h1", "h2", "h3"},
		remediation.State{Phase: remediation.PhaseFailed, Attempt: 2, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1",
			Finished: time.Now().Add(-time.Minute), Message: "node not back in time: retries exhausted, remediation failed"}, "h3")
	g.strayOn(t, "h1")
	// m1 is healthy again (its Node recovered on h2).
	g.c.SetNodeReady("m1", true)
	g.c.SetNeedsRemediation("m1", false)
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
	h1, _ := g.hosts.Get(ctx, "h1")
	t.Logf("h1 annotations=%v status=%+v", h1.Annotations, h1.Status)
	if g.hw["h1"].OffThroughout(from, to) && g.hw["h3"].WasOffDuring(from, to) {
		a, _ := g.c.GetAdmissions(ctx)
		t.Fatalf("MaxCount(1): h1 (off for m1's stray request, never on since: truth %v) and h3 (truth %v) both off at once by remediation requests; PrevHost h1 forgotten once the state was PhaseNone; admissions now %v",
			g.hw["h1"].Truth(), g.hw["h3"].Truth(), a.Machines)
	}
}

// TestReview40q_PrevHostWaitEscalationSaysRetriesExhausted: the wait for
// State.PrevHost (waitOverMoved, new in review 40p's fix) escalates at
// Timeout through escalate, which always appends "retries exhausted"
// (phased.go escalate): a Machine on its first attempt, with RetryLimit 1
// unused and no power cycle of its host made, is failed with a message
// saying its retries were exhausted, which sends the operator after the
// wrong cause.
func TestReview40q_PrevHostWaitEscalationSaysRetriesExhausted(t *testing.T) {
	now := time.Now()
	t0 := now.Add(-2 * time.Hour)
	cfg := remediation.Config{PollInterval: time.Second, Timeout: time.Minute}
	o := remediation.Observed{
		Machine:     remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", NeedsRemediation: true},
		Node:        remediation.Node{Name: "m1", UID: "n1"},
		Host:        remediation.Host{Name: "h2"},
		State:       remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(time.Minute), UnhealthyAgain: now.Add(-2 * cfg.Timeout)},
		Admitted:    true,
		MayStart:    true,
		PrevHostOff: true,
	}
	d := cfg.Decide(o, now)
	require.Equal(t, remediation.PhaseFailed, d.State.Phase, "precondition: the wait for h1 past Timeout escalates")
	if strings.Contains(d.State.Message, "retries exhausted") {
		t.Fatalf("first attempt, no retry made (RetryLimit 1), failed for waiting on h1: the message says %q", d.State.Message)
	}
}
