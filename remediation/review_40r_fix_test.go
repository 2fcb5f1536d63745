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

// TestStrayAdmissionAdmitsNoNewAttempt: an admission kept (or taken
// again) only because a finished Machine's own host is off for a stale
// request of its (State.StraySeen) is the storm guard's count of that
// host, not an admission of a new attempt: unhealthy again, the Machine
// starts one only if the storm guard lets it (Observed.MayStart), and it
// keeps its admission meanwhile.
func TestStrayAdmissionAdmitsNoNewAttempt(t *testing.T) {
	now := time.Now()
	t0 := now.Add(-2 * time.Hour)
	cfg := remediation.Config{PollInterval: time.Second, Timeout: time.Minute, MinHealthyPeriod: time.Minute}
	o := remediation.Observed{
		Machine: remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", NeedsRemediation: true},
		Node:    remediation.Node{Exists: true, Name: "m1", UID: "n1"},
		Host:    remediation.Host{Name: "h2", OffAfterRequest: true, Power: power.StateOff},
		State: remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2",
			Finished: t0.Add(10 * time.Minute), StraySeen: now.Add(-time.Minute)},
		Admitted:    true,
		GuardReason: "2 of 2 machines of cluster c unhealthy, more than the limit 1",
	}
	d := cfg.Decide(o, now)
	require.Equal(t, remediation.PhaseDone, d.State.Phase, "no new attempt while the storm guard refuses: %s", d.Reason)
	require.False(t, d.AddRebootAnnotation)
	require.False(t, d.Release, "h2 may be off for m1's stale request: kept")
	require.Contains(t, d.State.Message, "storm guard")

	o.MayStart = true
	d = cfg.Decide(o, now)
	require.Equal(t, remediation.PhasePowerOffRequested, d.State.Phase, "the storm guard lets it: a new attempt on h2 (%s)", d.Reason)
	require.True(t, d.State.StraySeen.IsZero(), "the attempt holds h2 by its own admission")

	// Not admitted (released before the stale request landed): admitted
	// again while h2 may be off for it, whatever the limit.
	o.Machine.NeedsRemediation, o.Admitted, o.MayStart = false, false, false
	d = cfg.Decide(o, now)
	require.True(t, d.Admit, "%s", d.Reason)
	require.False(t, d.Release)

	// h2 read on since: the sighting is forgotten and the admission goes.
	o.Admitted, o.Host.Power, o.Host.ConfirmedOn, o.Host.PoweredOn = true, power.StateOn, true, true
	d = cfg.Decide(o, now)
	require.True(t, d.State.StraySeen.IsZero())
	require.True(t, d.Release, "%s", d.Reason)
	require.NotContains(t, d.State.Message, "may be off")
}

// TestPassFindingStrayWritesNoRequestElsewhere: the pass that first
// finds a request of m1's on h1, a host it moved from, and h1 off after
// the move (PrevHostSeen still zero: no earlier pass found one), must not
// write m1's request to h3, its new host, in the same pass: h1 may be
// off for that request (readPrev counts a request found by the pass as
// a sighting, as readMembersPrev does).
func TestPassFindingStrayWritesNoRequestElsewhere(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	t1 := now.Add(-10 * time.Minute)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: false})
	c.SetNeedsRemediation("m1", true)
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t1.Add(-time.Hour))},
			Status: reboot.Status{PendingRebootSince: t1.Add(time.Minute), LastPoweredOff: t1.Add(2 * time.Minute)}},
		reboot.Host{Name: "h2", Online: true},
		reboot.Host{Name: "h3", Online: true})
	rec, err := c.Get(ctx, "m1")
	require.NoError(t, err)
	// Attempt 1's request on h2 is gone (released for the move) and h2
	// was never powered off for it: the move to h3 is not blocked by h2.
	st := remediation.State{Phase: remediation.PhasePowerOffRequested, Attempt: 1, Started: t1, RequestedAt: t1, Host: "h2", PrevHost: "h1", PrevHostSince: t1}
	require.NoError(t, c.SaveState(ctx, "m1", rec.Version, st))
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t1), At: t1, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": {Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t1}}
	require.NoError(t, c.PutAdmissions(ctx, a))
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{PollInterval: time.Second, Timeout: time.Hour},
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
			HostOf: func(context.Context, string) (string, error) { return "h3", nil }}}
	_, err = r.Reconcile(ctx, "m1")
	require.NoError(t, err)
	h3, _ := hosts.Get(ctx, "h3")
	rec, _ = c.Get(ctx, "m1")
	if _, ok := h3.Annotations[remediation.RebootAnnotation]; ok {
		t.Fatalf("m1's request written to h3 in the pass that found m1's request on h1, off since after the move (state: host %s prev %s seen %v, %q)",
			rec.State.Host, rec.State.PrevHost, rec.State.PrevHostSeen, rec.State.Message)
	}
	require.False(t, rec.State.PrevHostSeen.IsZero(), "the sighting on h1 is recorded")
}
