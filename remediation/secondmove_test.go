package remediation_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestSecondMoveRemovesStrayRequestOnReplacedPrevHost: the Reconciler
// side of TestReview40o_SecondMoveForgetsPrevHostWithStrayRequest. A
// Machine that moved h1 → h2 (PrevHost h1, where a stray request of its
// landed) and now maps to h3 removes the request on h1 first, writing
// nothing to h3 in that pass (the reboot controller may power h1 off for
// it before it is removed: review 40s), then starts its next attempt on
// h3 with PrevHost h2, the request on h1 gone before the state that
// forgets h1 is saved. Ground truth: the host store's annotations.
func TestSecondMoveRemovesStrayRequestOnReplacedPrevHost(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-3 * time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "db-1", UID: "u1", NodeName: "db-1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "db-1", UID: "n1", Ready: false})
	c.SetNeedsRemediation("db-1", true)
	rec, err := c.Get(ctx, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(time.Minute)}
	if err := c.SaveState(ctx, "db-1", rec.Version, st); err != nil {
		t.Fatal(err)
	}
	stray := map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t0)}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true, Annotations: stray},
		reboot.Host{Name: "h2", Online: true}, reboot.Host{Name: "h3", Online: true})
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
			HostOf: func(context.Context, string) (string, error) { return "h3", nil }},
		Config: remediation.Config{MinHealthyPeriod: time.Minute}}
	if _, err := r.Reconcile(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	h1, _ := hosts.Get(ctx, "h1")
	h3, _ := hosts.Get(ctx, "h3")
	if _, ok := h3.Annotations[remediation.RebootAnnotation]; ok {
		t.Fatalf("the pass that found db-1's request on h1 (%v) wrote one to h3 too", h1.Annotations)
	}
	if _, err := r.Reconcile(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Get(ctx, "db-1")
	h1, _ = hosts.Get(ctx, "h1")
	h3, _ = hosts.Get(ctx, "h3")
	if _, ok := h3.Annotations[remediation.RebootAnnotation]; !ok || got.State.Host != "h3" {
		t.Fatalf("precondition: a new attempt on h3: state %+v, h3 %v", got.State, h3.Annotations)
	}
	if _, ok := h1.Annotations[remediation.RebootAnnotation]; ok && got.State.PrevHost != "h1" {
		t.Fatalf("db-1's stray request is still on h1 (%v), and its state forgets h1 (PrevHost %q): no pass reads h1 again, held off for good",
			h1.Annotations, got.State.PrevHost)
	}
}

// supersededMachines is a fake.Cluster whose first Get of a Machine is
// followed by another leader's save (then, before this pass writes).
type supersededMachines struct {
	*fake.Cluster
	once  sync.Once
	other func()
}

func (s *supersededMachines) Get(ctx context.Context, name string) (remediation.MachineRecord, error) {
	rec, err := s.Cluster.Get(ctx, name)
	s.once.Do(s.other)
	return rec, err
}

// TestSecondMoveSupersededPassLeavesPrevHostAlone: the second move's
// removal of the request on the replaced State.PrevHost runs before the
// state is saved; a pass superseded since it read (another leader saved
// the Machine's state meanwhile) must act on no host, as every other
// host step checks (Reconciler.current). Ground truth: h1's annotations,
// and the pass's error (ErrConflict). Before: the superseded pass
// removed the request from h1, then failed at its own save.
func TestSecondMoveSupersededPassLeavesPrevHostAlone(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-3 * time.Hour)
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "db-1", UID: "u1", NodeName: "db-1", Cluster: "c"})
	c.PutNode(remediation.Node{Name: "db-1", UID: "n1", Ready: false})
	c.SetNeedsRemediation("db-1", true)
	rec, err := c.Get(ctx, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	st := remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2", PrevHost: "h1", Finished: t0.Add(time.Minute)}
	if err := c.SaveState(ctx, "db-1", rec.Version, st); err != nil {
		t.Fatal(err)
	}
	stray := map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", t0)}
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true, Annotations: stray},
		reboot.Host{Name: "h2", Online: true}, reboot.Host{Name: "h3", Online: true})
	ms := &supersededMachines{Cluster: c}
	ms.other = func() { // another leader's pass: its own view of db-1, still on h2 with h1 as PrevHost
		rec, _ := c.Get(ctx, "db-1")
		next := rec.State
		next.Message = "another leader's pass"
		if err := c.SaveState(ctx, "db-1", rec.Version, next); err != nil {
			t.Error(err)
		}
	}
	r := &remediation.Reconciler{Machines: ms, Nodes: c.Nodes(), Admissions: c, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
			HostOf: func(context.Context, string) (string, error) { return "h3", nil }},
		Config: remediation.Config{MinHealthyPeriod: time.Minute}}
	_, err = r.Reconcile(ctx, "db-1")
	h1, _ := hosts.Get(ctx, "h1")
	if _, ok := h1.Annotations[remediation.RebootAnnotation]; !ok {
		t.Fatalf("a pass superseded by another leader's save removed the request from h1 (err %v): it acted on a host for an attempt that is no longer the persisted one", err)
	}
	if !errors.Is(err, remediation.ErrConflict) {
		t.Fatalf("want ErrConflict from the superseded pass, got %v", err)
	}
}
