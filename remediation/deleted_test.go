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

// removalFails is a RebootHosts whose removals fail while fail is set.
type removalFails struct {
	*remediation.RebootAPIHosts
	fail bool
}

func (h *removalFails) RemoveRebootAnnotation(ctx context.Context, m string) error {
	if h.fail {
		return errors.New("hosts: connection refused")
	}
	return h.RebootAPIHosts.RemoveRebootAnnotation(ctx, m)
}

// TestDeletedMachineKeepsAdmissionUntilHostReleased: a Machine deleted
// while its request holds its host keeps its admission (the storm guard
// still counts the host that may be off) until the request is removed;
// then the admission is released.
func TestDeletedMachineKeepsAdmissionUntilHostReleased(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster()
	c.AddMachine(remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c"})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true,
		Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u1", time.Unix(1, 0))}})
	h := &removalFails{RebootAPIHosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "h1", nil }}, fail: true}
	require := func(ok bool, f string, a ...any) {
		t.Helper()
		if !ok {
			t.Fatalf(f, a...)
		}
	}
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m1"}
	require(c.PutAdmissions(ctx, a) == nil, "admit")
	require(c.Delete(ctx, "m1") == nil, "delete")
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Hosts: h, Admissions: c, Now: time.Now}

	_, err := r.Reconcile(ctx, "m1")
	a, _ = c.GetAdmissions(ctx)
	require(err != nil && a.Has("m1"), "removal failed: want an error and the admission kept; got %v, %v", err, a.Machines)

	h.fail = false
	_, err = r.Reconcile(ctx, "m1")
	require(errors.Is(err, remediation.ErrNotFound), "want ErrNotFound, got %v", err)
	a, _ = c.GetAdmissions(ctx)
	hh, _ := hosts.Get(ctx, "h1")
	_, held := hh.Annotations[remediation.RebootAnnotation]
	require(!a.Has("m1") && !held, "request removed then admission released: admissions %v, annotations %v", a.Machines, hh.Annotations)
}
