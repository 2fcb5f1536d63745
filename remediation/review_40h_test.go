package remediation_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// rig40h: one Machine m1 over hosts h1, h2 (each with its own fake
// hardware, the ground truth), a reboot controller running on its own,
// and a remediation Reconciler whose passes the test drives by hand.
type rig40h struct {
	cluster *fake.Cluster
	hosts   reboot.HostStore
	hw      map[string]*fake.Power
	hostOf  atomic.Value
	rh      *remediation.RebootAPIHosts
	rem     *remediation.Reconciler
}

func newRig40h(t *testing.T, cfg remediation.Config) *rig40h {
	t.Helper()
	g := &rig40h{cluster: fake.NewCluster()}
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c"})
	g.cluster.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	g.hosts = fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true})
	g.hw = map[string]*fake.Power{
		"h1": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
		"h2": fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond}),
	}
	g.hostOf.Store("h1")
	g.rh = &remediation.RebootAPIHosts{Hosts: g.hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return g.hostOf.Load().(string), nil }}
	g.rem = &remediation.Reconciler{Machines: g.cluster, Nodes: g.cluster.Nodes(), Admissions: g.cluster, Now: time.Now,
		Hosts: g.rh, Limit: remediation.MaxCount(1), Config: cfg}
	rb := &reboot.Reconciler{Hosts: g.hosts, Now: time.Now,
		Power:  func(h string) (power.Controller, error) { return g.hw[h], nil },
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(func(context.Context) ([]string, error) { return []string{"h1", "h2"}, nil })}}
	go func() { _ = r.Run(ctx) }()
	return g
}

// pass runs one remediation pass of m1 and returns its error.
func (g *rig40h) pass(t *testing.T) error {
	t.Helper()
	_, err := g.rem.Reconcile(context.Background(), "m1")
	t.Logf("pass: err=%v state=%+v", err, g.state())
	return err
}

func (g *rig40h) state() remediation.State {
	rec, err := g.cluster.Get(context.Background(), "m1")
	if err != nil {
		return remediation.State{}
	}
	return rec.State
}

// startOnH1 marks m1 unhealthy and runs the pass that admits it and
// writes its request to h1, then waits for the reboot controller to power
// h1 off (when off is set).
func (g *rig40h) startOnH1(t *testing.T, off bool) {
	t.Helper()
	g.cluster.SetNodeReady("m1", false)
	g.cluster.SetNeedsRemediation("m1", true)
	require.NoError(t, g.pass(t))
	st := g.state()
	require.Equal(t, remediation.PhasePowerOffRequested, st.Phase, "precondition: the attempt started")
	require.Equal(t, "h1", st.Host, "precondition: the request is persisted as h1's")
	if off {
		require.Eventually(t, func() bool { return !g.hw["h1"].HardwareOn() }, 10*time.Second, 10*time.Millisecond,
			"precondition: the reboot controller powers h1 off (truth %v)", g.hw["h1"].Truth())
	}
}

// heldFor reports, after settle (the reboot controller acts on what is
// left), whether h1 is still held by a reboot request and whether its
// hardware is off: ground truth.
func (g *rig40h) h1Held(t *testing.T, settle time.Duration) (held, off bool, ann map[string]string) {
	t.Helper()
	time.Sleep(settle)
	h, err := g.hosts.Get(context.Background(), "h1")
	require.NoError(t, err)
	_, held = h.Annotations[remediation.RebootAnnotation]
	return held, !g.hw["h1"].HardwareOn(), h.Annotations
}

// TestReview40h_CancelledAfterHostReleasedLeavesOldHostOff: doc.go:
// "Every end state (done, failed, cancelled, escalated) removes its reboot
// annotation (no host is left off)" and "the request is read and removed
// there [State.Host], whatever the Machine maps to later". A Machine whose
// request was written to h1, whose HostOf then answers "" (its host was
// released: Host.Missing) and whose health checker then clears the mark
// (cancel) ends in PhasePowerOffRequested's first case
// (phased.go:405, `!m.NeedsRemediation && o.Host.Missing`): Done, admission
// released, no removal, although RebootAPIHosts.Get read h1's annotation
// (o.Host.RebootAnnotation is true: it reads req.Host). Done's own pass
// then resolves the host anew (RequestFor is zero out of flight) and finds
// none. h1 stays held off for good, owned by no remediation. Ground truth:
// h1's hardware is off, with the request, after the remediation is done.
//
// Since round 11 (TestReview40k_HostReleasedThenCancelledReleasesWhileOff)
// the cancel stays in flight, admitted, while h1 is held for its request
// (the Node not back: until the attempt's timeout, 2 s here), as every
// cancel does: the passes run until it ends.
func TestReview40h_CancelledAfterHostReleasedLeavesOldHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second})
	g.startOnH1(t, true)
	g.hostOf.Store("") // h1 released from m1 (deprovisioned, consumer ref cleared)
	g.cluster.SetNeedsRemediation("m1", false)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_ = g.pass(t)
		if a, _ := g.cluster.GetAdmissions(context.Background()); !remediation.InFlight(g.state().Phase) && !a.Has("m1") {
			break
		}
	}
	st := g.state()
	a, _ := g.cluster.GetAdmissions(context.Background())
	require.False(t, remediation.InFlight(st.Phase), "precondition: the remediation ended (%+v)", st)
	require.False(t, a.Has("m1"), "precondition: its admission is released")
	held, off, ann := g.h1Held(t, 2*time.Second)
	if held || off {
		t.Fatalf("m1's remediation ended (%s, admission released) but h1, the host its request was written to (State.Host %q), is still held (annotations %v) and off (%v): the cancel-with-no-host branch removes nothing; truth %v",
			st.Phase, st.Host, ann, off, g.hw["h1"].Truth())
	}
}

// TestReview40h_MovedThenDeletedLeavesOldHostOff: doc.go: "A Machine
// deleted mid-remediation ... has the reboot request removed from the host
// the HostStore resolves for it ... so the reboot controller powers the
// host on, and only then its admission released." The engineer admits a
// Machine moved then deleted leaves its old host held; here it is proven.
// m1's request holds h1 off; m1 is moved to h2 and deleted before a pass
// sees the move. abandon (reconciler.go:286) removes from HostOf's answer,
// h2, which holds nothing, and releases the admission: h1 is held off for
// good, and the storm guard counts it no more.
func TestReview40h_MovedThenDeletedLeavesOldHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	g.hostOf.Store("h2")
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	a, _ := g.cluster.GetAdmissions(context.Background())
	held, off, ann := g.h1Held(t, 2*time.Second)
	if (held || off) && !a.Has("m1") {
		t.Fatalf("m1 (request on h1, then moved to h2) was deleted: its admission is released (%v) but h1 is still held (annotations %v) and off (%v); truth %v",
			a.Machines, ann, off, g.hw["h1"].Truth())
	}
	if held || off {
		t.Fatalf("m1 deleted after a move: h1 still held (annotations %v), off %v", ann, off)
	}
}

// TestReview40h_DeletedWithHostOfEmptyReleasesWhileHostOff: RebootHosts'
// HostOf doc: "" with a nil error if the Machine has no host; the
// natural answer of an inventory lookup for a Machine that is gone. The
// Reconciler's doc asks it to "keep answering for a deleted Machine", and
// abandon's doc says only ErrNotFound means "nothing to release"; yet an
// empty answer makes RemoveRebootRequest succeed without touching any host
// (reboothosts.go:193, `name == ""`: "no host, no annotation"), and abandon
// releases the admission while h1 is held off, for good.
func TestReview40h_DeletedWithHostOfEmptyReleasesWhileHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute})
	g.startOnH1(t, true)
	g.hostOf.Store("") // the inventory no longer knows m1
	require.NoError(t, g.cluster.Delete(context.Background(), "m1"))
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	a, _ := g.cluster.GetAdmissions(context.Background())
	held, off, ann := g.h1Held(t, 2*time.Second)
	if (held || off) && !a.Has("m1") {
		t.Fatalf("m1 deleted while its request holds h1; HostOf answers \"\" for it: its admission is released (%v) while h1 is held (annotations %v) and off (%v), for good; truth %v",
			a.Machines, ann, off, g.hw["h1"].Truth())
	}
}

// removeFailsOnce is a RebootHosts whose next request removal fails (a
// refused connection; equally a crash right after the state write).
type removeFailsOnce struct {
	*remediation.RebootAPIHosts
	fail atomic.Bool
}

func (h *removeFailsOnce) RemoveRebootRequest(ctx context.Context, m string, req remediation.Request) error {
	if h.fail.CompareAndSwap(true, false) {
		return errors.New("hosts: connection refused")
	}
	return h.RebootAPIHosts.RemoveRebootRequest(ctx, m, req)
}

func (h *removeFailsOnce) RemoveRebootAnnotation(ctx context.Context, m string) error {
	return h.RemoveRebootRequest(ctx, m, remediation.Request{})
}

// TestReview40h_FailedAfterLostRemovalLeavesOldHostOff: Decision's order
// persists the end state before the request is removed (UpdateState, then
// RemoveRebootAnnotation), and doc.go promises "Every end state ... removes
// its reboot annotation (no host is left off)" and "the request is ...
// removed there [State.Host], whatever the Machine maps to later". m1's
// request holds h1; its host is released (HostOf ""), the attempt times
// out and escalates: Failed is persisted, the removal from h1 fails once
// (or the process dies there). Every later pass is out of flight, where
// RequestFor (phased.go RequestFor) returns the zero Request and the
// "never leave a host held" check (phased.go:382) reads the host HostOf
// names now, none, though State.Host still says h1. h1 stays off for good,
// its admission released. The same happens with a move instead of "".
func TestReview40h_FailedAfterLostRemovalLeavesOldHostOff(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 500 * time.Millisecond, RetryLimit: -1})
	h := &removeFailsOnce{RebootAPIHosts: g.rh}
	g.rem.Hosts = h
	g.startOnH1(t, true)
	g.hostOf.Store("") // h1 released from m1
	time.Sleep(600 * time.Millisecond)
	h.fail.Store(true)
	err := g.pass(t)
	require.Error(t, err, "precondition: the removal after the escalation fails once")
	require.Equal(t, remediation.PhaseFailed, g.state().Phase, "precondition: Failed was persisted before the removal")
	for i := 0; i < 3; i++ {
		_ = g.pass(t)
	}
	st := g.state()
	a, _ := g.cluster.GetAdmissions(context.Background())
	held, off, ann := g.h1Held(t, 2*time.Second)
	if held || off {
		t.Fatalf("m1's remediation failed (%s, State.Host %q, admission released %v) but h1 is still held (annotations %v) and off (%v): out of flight the request's host is forgotten; truth %v",
			st.Phase, st.Host, !a.Has("m1"), ann, off, g.hw["h1"].Truth())
	}
}

// TestReview40h_EscalationLostAfterStateWriteNeverDeletesMachine: doc
// (Decision, escalate): retries exhausted, "delete the Machine for its
// owner to replace". The escalation persists Failed first (UpdateState,
// step 2) and deletes the Machine last (step 8); any step between that
// fails once (here the reboot request's removal: a refused connection;
// equally a crash after the state write) loses the deletion for good:
// every later pass sees PhaseFailed and only "waits for the Machine to be
// replaced or the annotation removed" (phased.go:396), which nobody will
// do: the owner replaces only a deleted Machine. The broken server stays
// in the cluster, unremediated, for ever.
func TestReview40h_EscalationLostAfterStateWriteNeverDeletesMachine(t *testing.T) {
	t.Parallel()
	g := newRig40h(t, remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: 500 * time.Millisecond, RetryLimit: -1})
	g.cluster.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c", HasControllerOwner: true})
	h := &removeFailsOnce{RebootAPIHosts: g.rh}
	g.rem.Hosts = h
	g.startOnH1(t, false)
	time.Sleep(600 * time.Millisecond) // the attempt times out: escalation
	h.fail.Store(true)
	require.Error(t, g.pass(t), "precondition: the escalation pass fails after persisting Failed")
	require.Equal(t, remediation.PhaseFailed, g.state().Phase, "precondition: Failed persisted")
	for i := 0; i < 5; i++ {
		_ = g.pass(t)
	}
	if _, err := g.cluster.Get(context.Background(), "m1"); !errors.Is(err, remediation.ErrNotFound) {
		t.Fatalf("m1 (with a controller owner) escalated after its retries ran out, but it was never deleted for its owner to replace (Get: %v, state %+v): the escalation's deletion is lost once Failed is persisted", err, g.state())
	}
}

// TestReview40h_MovedMachineRemovesAnotherMachinesRequest: doc.go: "A
// Machine whose host changes while its request holds the old one ... has
// that request removed first". It removes any request on the old host,
// whatever its value (RebootAPIHosts.RemoveRebootRequest, reboothosts.go:185:
// "removes the annotation, whatever its value"; Decide's moved case keys
// on Host.RebootAnnotation, present with any value). A host is re-used:
// m1 moves from h1 to h2 and h1 is given to m9, whose own remediation
// then writes its request on h1. m1's next pass removes m9's request, so
// the reboot controller powers h1 on under m9's remediation (its hold
// broken, its fence evidence lost); m9 writes again, m1 removes again: m1
// never moves on to h2 while m9 holds h1, and m9 cannot be fenced while
// m1 keeps removing. Ground truth: h1's annotation after m1's pass.
func TestReview40h_MovedMachineRemovesAnotherMachinesRequest(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c"})
	c.AddMachine(remediation.Machine{Name: "m9", UID: "uid-m9", NodeName: "m9", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	c.PutNode(remediation.Node{Name: "m9", UID: "n9", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true}, reboot.Host{Name: "h9", Online: true})
	var mapping atomic.Value
	mapping.Store(map[string]string{"m1": "h1", "m9": "h9"})
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(_ context.Context, m string) (string, error) { return mapping.Load().(map[string]string)[m], nil }}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Hosts: rh,
		Limit: remediation.MaxPercent(100), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Minute}}
	pass := func(m string) {
		_, err := r.Reconcile(ctx, m)
		rec, _ := c.Get(ctx, m)
		t.Logf("%s: err=%v phase=%s host=%q", m, err, rec.State.Phase, rec.State.Host)
	}
	c.SetNodeReady("m1", false)
	c.SetNeedsRemediation("m1", true)
	pass("m1")
	// h1 is re-used: m1 now runs on h2, m9 on h1; m9 fails and its
	// remediation asks for h1.
	mapping.Store(map[string]string{"m1": "h2", "m9": "h1"})
	c.SetNodeReady("m9", false)
	c.SetNeedsRemediation("m9", true)
	pass("m9")
	rec9, err := c.Get(ctx, "m9")
	require.NoError(t, err)
	want := remediation.RequestFor(rec9.Machine, rec9.State)
	require.Equal(t, "h1", want.Host, "precondition: m9's request is on h1")
	h1, _ := hosts.Get(ctx, "h1")
	require.Equal(t, want.Value, h1.Annotations[remediation.RebootAnnotation], "precondition: h1 holds m9's request")

	pass("m1")
	h1, _ = hosts.Get(ctx, "h1")
	if got := h1.Annotations[remediation.RebootAnnotation]; got != want.Value {
		t.Fatalf("m1 moved from h1 to h2; h1 now holds m9's own request %s, and m1's pass removed it (h1's annotation now %q): a moved Machine releases whatever request is on its old host, not its own",
			want.Value, got)
	}
}

// TestReview40h_NounsRewriteHostNamesInMoveReasons: Config.Decide
// (nouns.go:170): "The words are replaced in the messages' own text; the
// names in them (only the storm guard's reason has any) are kept as they
// are." Round 7's move reasons (phased.go releaseMoved, and the moved
// request) carry host names, and sayAround rewrites them: a host named
// "node-a" becomes "server-a" in the reason, a host that does not exist.
func TestReview40h_NounsRewriteHostNamesInMoveReasons(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := remediation.Config{Nouns: remediation.Nouns{Machine: "server", Machines: "servers", Node: "server"}}
	m := remediation.Machine{Name: "db-1", UID: "u1", NeedsRemediation: true, NodeName: "db-1"}
	st := remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t0, RequestedAt: t0, Host: "node-a"}
	d := cfg.Decide(remediation.Observed{Machine: m, State: st, Host: remediation.Host{Name: "node-b", RebootAnnotation: true}, Admitted: true}, t0.Add(time.Second))
	require.True(t, d.RemoveRebootAnnotation, "precondition: the move releases node-a first")
	if !strings.Contains(d.Reason, "node-a") || !strings.Contains(d.Reason, "node-b") {
		t.Fatalf("the move's reason names hosts that do not exist: %q (hosts node-a and node-b; the nouns rewrote the names)", d.Reason)
	}
}

// TestReview40h_WatchDeafToRequestHostAfterMove: Loop's doc (run.go):
// "When Hosts is a *RebootHosts over a store that can watch ..., it is
// also woken whenever its host's record changes: the reboot controller's
// evidence is acted on at once, not at the next poll." Since round 7 the
// evidence is read on State.Host (the host the request was written to),
// but watchWithHost watches the host HostOf names now: after a move the
// request's host (where the reboot controller powers the old host on, or
// off, for this attempt) wakes nobody, and each step waits for
// PollInterval. Here db-1 waits in PoweringOn for bmh-1 (its State.Host)
// while HostOf names bmh-2; PollInterval is 1 h; the reboot controller's
// evidence on bmh-1 gets no pass in 2 s.
func TestReview40h_WatchDeafToRequestHostAfterMove(t *testing.T) {
	t0 := time.Now()
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Unhealthy: true,
		State: remediation.State{Phase: remediation.PhasePoweringOn, Attempt: 1, Started: t0, RequestedAt: t0, Host: "bmh-1"}})
	machines, nodes := remediation.Records(inv)
	hosts := fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true}, reboot.Host{Name: "bmh-2", Online: true})
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "bmh-2", nil }}
	adm := fake.NewCluster()
	a, _ := adm.GetAdmissions(context.Background())
	a.Machines = []string{"db-1"}
	require.NoError(t, adm.PutAdmissions(context.Background(), a))
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh, Admissions: adm, Now: time.Now,
		Config: remediation.Config{PollInterval: time.Hour, OutOfService: true}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := runQuiet(t, ctx, r, 1500*time.Millisecond, 300*time.Millisecond)
	// The reboot controller's evidence on bmh-1: powered on after the request.
	h1, err := hosts.Get(ctx, "bmh-1")
	require.NoError(t, err)
	h1.Status.LastPoweredOn = time.Now()
	h1.Status.OnConfirmed = h1.Status.LastPoweredOn
	_, err = hosts.Update(ctx, h1)
	require.NoError(t, err)
	if !waitPass(count, 2*time.Second) {
		rec, _ := inv.Get(ctx, "db-1")
		t.Fatalf("bmh-1, the host db-1's request was written to (State.Host), got the reboot controller's power-on evidence, but db-1 got no pass in 2 s (PollInterval 1 h, state %s): the watch follows HostOf (bmh-2), not State.Host", rec.State.Phase)
	}
}
