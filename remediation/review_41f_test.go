package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview41_EscalatedMachineDeletedKeepsAdmissionWhileHostOff: a
// remediation escalated (Failed, DeleteMachine for its owner) while the
// reboot controller powered its host off and the BMC refuses the
// power-on keeps its admission (remediation.Held: the storm guard's count
// of hosts taken off). The escalation's own Machine deletion then ends
// that: the next pass finds the Machine gone (Reconciler.abandon) and
// releases the admission at once, the host still off and the reboot
// still pending. The storm guard then admits another Machine over the
// limit with this host still off (ground truth: the reboot host's
// status, nobody powered it on).
//
// Two records: the admission records the attempt's request (as the
// Reconciler writes it with the admission) and HostOf fails for the
// deleted Machine, as kube.HostOfMachine does, so the host is read
// through the recorded request; or the record has no request (written
// before Admissions.Requests) and HostOf still answers: the pass over
// the failed remediation records its last request.
func TestReview41_EscalatedMachineDeletedKeepsAdmissionWhileHostOff(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(map[bool]string{true: "recorded request, HostOf fails", false: "no recorded request, HostOf answers"}[recorded], func(t *testing.T) {
			escalatedMachineDeleted(t, recorded)
		})
	}
}

func escalatedMachineDeleted(t *testing.T, recorded bool) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c", NeedsRemediation: true, HasControllerOwner: true})
	c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "n2", Cluster: "c", NeedsRemediation: true})
	rec, _ := c.Get(ctx, "m1")
	st := remediation.State{Phase: remediation.PhaseFailed, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h1", Finished: t0.Add(10 * time.Minute)}
	if err := c.SaveState(ctx, "m1", rec.Version, st); err != nil {
		t.Fatal(err)
	}
	// Off after the request; the power-on refused, a reboot pending.
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), PendingRebootSince: t0}},
		reboot.Host{Name: "h2"})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	if recorded {
		a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("u1", t0), At: t0, Host: "h1"}}
	}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	hostOf := map[string]string{"m1": "h1", "m2": "h2"}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Limit: remediation.MaxCount(1),
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(_ context.Context, m string) (string, error) {
			h, ok := hostOf[m]
			if !ok {
				return "", remediation.ErrNotFound // as kube.HostOfMachine for a deleted Machine
			}
			return h, nil
		}}}
	if _, err := r.Reconcile(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
		t.Fatal("precondition: the failed remediation of m1 released its admission with h1 held off")
	}
	// The escalation deleted the Machine (its owner replaces it).
	if _, err := c.Get(ctx, "m1"); err == nil {
		if err := c.Delete(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
	}
	if recorded {
		delete(hostOf, "m1") // a deleted Machine maps to no host: its recorded request names it
	}
	_, _ = r.Reconcile(ctx, "m1")
	h1, _ := hosts.Get(ctx, "h1")
	if !h1.Status.Pending() || h1.Status.LastPoweredOn.After(h1.Status.LastPoweredOff) {
		t.Fatalf("test setup: h1 is no longer held off: %+v", h1.Status)
	}
	if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
		t.Errorf("m1 deleted by its escalation: its admission released while h1 is still off with a reboot pending (remediation.Held)")
	}
	if _, err := r.Reconcile(ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.GetAdmissions(ctx); a.Has("m2") {
		t.Errorf("storm guard MaxCount(1): m2 admitted (its host h2 about to be powered off) while h1 is still off for m1's remediation")
	}
	// The reboot controller powers h1 on: the admission goes.
	h1, _ = hosts.Get(ctx, "h1")
	h1.Status.LastPoweredOn, h1.Status.PendingRebootSince = time.Now(), time.Time{}
	h1.Status.OnConfirmed = h1.Status.LastPoweredOn // and read it On (no Power here)
	if _, err := hosts.Update(ctx, h1); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Reconcile(ctx, "m1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") {
		t.Errorf("h1 is on again: m1 (gone) still admitted: %+v", a)
	}
}

// TestReview41_FailedClearedKeepsAdmissionWhileHostOff: a failed
// remediation (escalated after the reboot controller powered its host
// off; the BMC refuses the power-on, a reboot pending) whose
// needs-remediation mark is then removed is "cleared" to PhaseNone while
// the host is held: the first pass keeps the admission (keeps on the old
// state), but LastRequest answers the zero Request for PhaseNone, so the
// next pass reads the host for no request, finds nothing held and
// releases the admission with the host still off (ground truth: its
// reboot status unchanged). In the kube module the same read lets the
// finalizer of a deleted PowerCycleRemediation go (report: Held with
// LastRequest).
func TestReview41_FailedClearedKeepsAdmissionWhileHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c"}) // mark removed
	rec, _ := c.Get(ctx, "m1")
	st := remediation.State{Phase: remediation.PhaseFailed, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h1", Finished: t0.Add(10 * time.Minute),
		Message: "host not on in time: retries exhausted, remediation failed"}
	if err := c.SaveState(ctx, "m1", rec.Version, st); err != nil {
		t.Fatal(err)
	}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), PendingRebootSince: t0}})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
	for i := 1; i <= 3; i++ {
		if _, err := r.Reconcile(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
		h1, _ := hosts.Get(ctx, "h1")
		if !h1.Status.Pending() || h1.Status.LastPoweredOn.After(h1.Status.LastPoweredOff) {
			t.Fatalf("test setup: h1 no longer held off: %+v", h1.Status)
		}
		if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
			rec, _ := c.Get(ctx, "m1")
			t.Fatalf("pass %d: m1's admission released while h1 is still off with a reboot pending (state now %s)", i, rec.State.Phase)
		}
	}
}

// TestReview41_StormGuardCountsOtherControllersAdmissions: the admission
// record another remediation controller shares (Admissions.Others: the
// kube module's PowerCycleRemediations next to its Machine remediation)
// counts against the storm guard: with MaxCount(1) and one host held by
// the other controller, no Machine is admitted (no reboot request on its
// host: ground truth, the reboot host's annotations); once the other
// admission is released, it is.
func TestReview41_StormGuardCountsOtherControllersAdmissions(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c", NeedsRemediation: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1"})
	a, _ := c.GetAdmissions(ctx)
	a.Others = map[string]string{"m1": "h9"} // the other controller's object may have this Machine's name
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Limit: remediation.MaxCount(1),
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
	if _, err := r.Reconcile(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	h1, _ := hosts.Get(ctx, "h1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") || len(h1.Annotations) > 0 {
		t.Fatalf("MaxCount(1), one host held by the other controller: m1 admitted (%+v), h1's annotations %v", a, h1.Annotations)
	}
	if a, _ := c.GetAdmissions(ctx); a.Others["m1"] != "h9" {
		t.Fatalf("the other controller's admission was changed: %+v", a)
	}
	a, _ = c.GetAdmissions(ctx)
	a.Others = nil
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	h1, _ = hosts.Get(ctx, "h1")
	if a, _ := c.GetAdmissions(ctx); !a.Has("m1") || len(h1.Annotations) == 0 {
		t.Fatalf("the other admission released: m1 not admitted (%+v), h1's annotations %v", a, h1.Annotations)
	}
}

// TestReview41_OtherAdmissionsKeepPercentDenominator: with a percentage
// limit, another controller's admission (Admissions.Others, its Node
// unknown) counts as one more unhealthy member without growing the fleet:
// counted as a member of its own, 2 unhealthy of 4 would pass
// MaxPercent(50) where the truth (its host is one of the 3 Nodes) is 2 of
// 3, over the limit.
func TestReview41_OtherAdmissionsKeepPercentDenominator(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c", NeedsRemediation: true})
	c.AddMachine(remediation.Machine{Name: "m2", UID: "u2", NodeName: "n2", Cluster: "c"})
	c.AddMachine(remediation.Machine{Name: "m3", UID: "u3", NodeName: "n3", Cluster: "c"})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1"})
	a, _ := c.GetAdmissions(ctx)
	a.Others = map[string]string{"pcr-n2": "h2"}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now, Limit: remediation.MaxPercent(50),
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
	if _, err := r.Reconcile(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	h1, _ := hosts.Get(ctx, "h1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") || len(h1.Annotations) > 0 {
		t.Fatalf("MaxPercent(50) of 3 with one host held by the other controller: m1 admitted (%+v), h1's annotations %v", a, h1.Annotations)
	}
}
