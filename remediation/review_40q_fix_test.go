package remediation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// goneRig40q is a gone Machine m1 (never added) whose admission records
// its request on h2 and member mem, over hosts hs.
func goneRig40q(t *testing.T, t0 time.Time, mem remediation.Member, hs ...reboot.Host) (*fake.Cluster, *fake.RebootHosts, *remediation.Reconciler) {
	t.Helper()
	ctx := context.Background()
	c := fake.NewCluster()
	hosts := fake.NewRebootHosts(hs...)
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	a.Requests = map[string]remediation.Request{"m1": {Value: remediation.RebootValue("uid-m1", t0), At: t0, Host: "h2"}}
	a.Members = map[string]remediation.Member{"m1": mem}
	if err := c.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, HostsMayVanish: true,
			HostOf: func(context.Context, string) (string, error) { return "", remediation.ErrNotFound }}}
	return c, hosts, r
}

// TestGoneMovedMachinePrevHostOffForAnother: review 40q's finding 3 for
// a Machine that is gone (releaseRecorded read Member.PrevHost for the
// recorded request's time, whoever powered it off): h1, which m1 moved
// from, is off for another Machine's reboot (pending, no request of
// m1's ever found there: Member.PrevHostSeen zero). m1's admission is
// released: h1 is counted by the other's admission, not m1's. Before:
// kept (ErrHostHeld) for as long as h1 stays off.
func TestGoneMovedMachinePrevHostOffForAnother(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c, _, r := goneRig40q(t, t0, remediation.Member{Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t0},
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("uid-m3", t0.Add(time.Minute))},
			Status: reboot.Status{LastPoweredOff: t0.Add(2 * time.Minute), PendingRebootSince: t0.Add(time.Minute)}},
		reboot.Host{Name: "h2", Online: true})
	_, err := r.Reconcile(ctx, "m1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") {
		t.Fatalf("h1 is off for m3's request only: want gone m1's admission released, kept (err %v)", err)
	}
}

// TestGoneMovedMachineRecordsStrayBeforeRemoval: a gone Machine's
// request found on the host it moved from (h1, Member.PrevHostSeen zero:
// no pass found one before) is recorded in its Member (PrevHostSeen)
// before it is removed, and the admission is kept while h1 is off for it
// (its power-on decided, never confirmed On), released once the reboot
// controller confirms h1 On. Ground truth: the host store's annotations
// and the admission record. Before: the request was removed blind and
// nothing recorded it.
func TestGoneMovedMachineRecordsStrayBeforeRemoval(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c, hosts, r := goneRig40q(t, t0, remediation.Member{Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t0},
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("uid-m1", t0.Add(-time.Hour))},
			Status: reboot.Status{LastPoweredOff: t0.Add(2 * time.Minute), PendingRebootSince: t0.Add(time.Minute)}},
		reboot.Host{Name: "h2", Online: true})
	_, err := r.Reconcile(ctx, "m1")
	a, _ := c.GetAdmissions(ctx)
	h1, _ := hosts.Get(ctx, "h1")
	if _, on := h1.Annotations[remediation.RebootAnnotation]; on || !a.Has("m1") || a.Members["m1"].PrevHostSeen.IsZero() || !errors.Is(err, remediation.ErrHostHeld) {
		t.Fatalf("m1's request on h1: want it recorded (PrevHostSeen), removed, the admission kept (ErrHostHeld); got annotations %v, admitted %v, member %+v, err %v",
			h1.Annotations, a.Has("m1"), a.Members["m1"], err)
	}
	// The controller decides the power-on, the BMC refuses it: kept.
	h1.Status = reboot.Status{LastPoweredOff: t0.Add(2 * time.Minute), LastPoweredOn: t0.Add(3 * time.Minute)}
	if _, err := hosts.Update(ctx, h1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, "m1"); !errors.Is(err, remediation.ErrHostHeld) {
		t.Fatalf("h1 off for m1's request found there (power-on never confirmed): want ErrHostHeld, got %v", err)
	}
	if a, _ := c.GetAdmissions(ctx); !a.Has("m1") {
		t.Fatal("h1 off for m1's request found there: admission released")
	}
	h1, _ = hosts.Get(ctx, "h1")
	h1.Status.OnConfirmed = h1.Status.LastPoweredOn
	if _, err := hosts.Update(ctx, h1); err != nil {
		t.Fatal(err)
	}
	_, err = r.Reconcile(ctx, "m1")
	if a, _ := c.GetAdmissions(ctx); a.Has("m1") {
		t.Fatalf("h1 confirmed On: want m1's admission released, kept (err %v)", err)
	}
}

// TestGoneMovedTwiceKeepsAdmissionWhileEarlierHostOff: a gone Machine
// that moved twice (h0 -> h1 -> h2) with a request of its found on h0
// (Member.EarlierHosts, Seen) keeps its admission while h0 is off for it.
// Before: one PrevHost slot, h0 was forgotten at the second move.
func TestGoneMovedTwiceKeepsAdmissionWhileEarlierHostOff(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	c, _, r := goneRig40q(t, t0, remediation.Member{Cluster: "c", Wrote: true, PrevHost: "h1", PrevHostSince: t0,
		EarlierHosts: []remediation.MovedFrom{{Host: "h0", Since: t0.Add(-time.Hour), Seen: t0.Add(-30 * time.Minute)}}},
		reboot.Host{Name: "h0", Online: true, Status: reboot.Status{LastPoweredOff: t0.Add(-40 * time.Minute), LastPoweredOn: t0.Add(-20 * time.Minute)}},
		reboot.Host{Name: "h1", Online: true}, reboot.Host{Name: "h2", Online: true})
	_, err := r.Reconcile(ctx, "m1")
	if a, _ := c.GetAdmissions(ctx); !a.Has("m1") || !errors.Is(err, remediation.ErrHostHeld) {
		t.Fatalf("h0 off for m1's request found there: want the admission kept (ErrHostHeld), got admitted %v err %v", a.Has("m1"), err)
	}
}
