package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReconcilerKeepsAdmissionWhileGaveUpHostOff: the Reconciler reads
// the host of a remediation that is over for its last request
// (remediation.LastRequest), so one that gave up after a cancellation
// while the reboot controller had powered its host off keeps its
// admission (the storm guard's count) on every later pass until the
// controller powered the host on; then it releases it. Before, the host
// was read for no request at all once the attempt was over: nothing
// held, the admission released on the next pass with the host still off.
func TestReconcilerKeepsAdmissionWhileGaveUpHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "n1", Cluster: "c"}) // not marked: cancelled
	rec, _ := c.Get(ctx, "m1")
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h1",
		Canceled: true, CanceledAt: t0, Finished: t0.Add(10 * time.Minute)}
	if err := c.SaveState(ctx, "m1", rec.Version, st); err != nil {
		t.Fatal(err)
	}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1",
		Status: reboot.Status{LastPoweredOff: t0.Add(time.Minute), LastPoweredOn: t0.Add(2 * time.Minute), PendingRebootSince: t0}})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
	set := func(s reboot.Status) {
		h, _ := hosts.Get(ctx, "h1")
		h.Status = s
		if _, err := hosts.Update(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	pass := func() bool {
		t.Helper()
		if _, err := r.Reconcile(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
		a, _ := c.GetAdmissions(ctx)
		return a.Has("m1")
	}
	// Powered off again after the request, its power-on refused: a reboot
	// pending.
	set(reboot.Status{LastPoweredOff: t0.Add(20 * time.Minute), LastPoweredOn: t0.Add(2 * time.Minute), PendingRebootSince: t0.Add(19 * time.Minute)})
	for i := 0; i < 3; i++ {
		if !pass() {
			t.Fatalf("pass %d: the admission of m1 released while the reboot controller holds h1 off for its last request", i+1)
		}
	}
	// Off after the request, nothing pending, not powered on after it.
	set(reboot.Status{LastPoweredOff: t0.Add(20 * time.Minute), LastPoweredOn: t0.Add(-time.Minute)})
	if !pass() {
		t.Fatal("the admission of m1 released while h1 is off after its last request and not powered on since")
	}
	// Power-on decided, not confirmed (a BMC may refuse it): still held.
	set(reboot.Status{LastPoweredOff: t0.Add(20 * time.Minute), LastPoweredOn: t0.Add(21 * time.Minute)})
	if !pass() {
		t.Fatal("the admission of m1 released on the recorded power-on alone, no On reading confirming it (Status.OnConfirmed)")
	}
	// Powered on, confirmed by the controller's On reading.
	set(reboot.Status{LastPoweredOff: t0.Add(20 * time.Minute), LastPoweredOn: t0.Add(21 * time.Minute), OnConfirmed: t0.Add(21 * time.Minute)})
	if pass() {
		t.Fatal("h1 powered on: the admission of m1 is still held")
	}
}
