package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// failRemoveOnce is a remediation.RebootHosts whose next request removal
// fails (the API server's conflict, a timeout).
type failRemoveOnce struct {
	*remediation.RebootHosts
	fail atomic.Bool
}

func (h *failRemoveOnce) RemoveRebootRequest(ctx context.Context, m string, req remediation.Request) error {
	if h.fail.CompareAndSwap(true, false) {
		return errors.New("the server is currently unable to handle the request")
	}
	return h.RebootHosts.RemoveRebootRequest(ctx, m, req)
}

// TestReview40b_DeletedMachineAbandonErrorNotRequeued: remediation's doc:
// a Machine deleted mid-remediation has its request removed from its host
// before its admission is released, and "until the removal succeeds the
// admission is kept and the pass retried". The Reconciler returns
// errors.Join(ErrNotFound for the Machine, abandon's error);
// RemediationController.Reconcile (remediationcontroller.go: errors.Is(err,
// remediation.ErrNotFound) → ctrl.Result{}, nil) takes the joined error for
// "the Machine is gone, nothing to do": no error, no requeue. Nothing
// else ever wakes a deleted Machine (no Machine event; the host watch maps
// a host only to existing Machines; a resync lists existing ones), so one
// failed removal leaves the host held off for good and the storm guard's
// slot taken for ever. Ground truth: the host's annotation and the
// admission record after the controller's pass.
func TestReview40b_DeletedMachineAbandonErrorNotRequeued(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewCluster()
	cl.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c"})
	cl.PutNode(remediation.Node{Name: "m1", UID: "n1"})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true})
	rh := &failRemoveOnce{RebootHosts: &remediation.RebootHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "h1", nil }}}
	rec := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Admissions: cl, Hosts: rh, Now: time.Now, Limit: remediation.MaxCount(1)}
	c := &RemediationController{Reconciler: rec, Namespace: "ns"}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "m1"}}
	cl.SetNeedsRemediation("m1", true)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatalf("precondition: the remediation starts: %v", err)
	}
	h, _ := hosts.Get(ctx, "h1")
	if _, ok := h.Annotations[remediation.RebootAnnotation]; !ok {
		t.Fatal("precondition: the request holds h1")
	}
	if err := cl.Delete(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	rh.fail.Store(true)
	res, err := c.Reconcile(ctx, req)
	a, _ := cl.GetAdmissions(ctx)
	h, _ = hosts.Get(ctx, "h1")
	_, held := h.Annotations[remediation.RebootAnnotation]
	if err == nil && res.RequeueAfter == 0 && !res.Requeue && (held || a.Has("m1")) {
		t.Fatalf("deleted m1's request removal failed (h1 held %v, admission kept %v) but the controller returned no error and no requeue (%+v): "+
			"nothing wakes a deleted Machine again, h1 stays off and its storm-guard slot taken for good", held, a.Has("m1"), res)
	}
}
