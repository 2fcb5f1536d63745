package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// failRemoveOnce is a remediation.RebootAPIHosts whose next request removal
// fails (the API server's conflict, a timeout).
type failRemoveOnce struct {
	*remediation.RebootAPIHosts
	fail atomic.Bool
}

func (h *failRemoveOnce) RemoveRebootRequest(ctx context.Context, m string, req remediation.Request) error {
	if h.fail.CompareAndSwap(true, false) {
		return errors.New("the server is currently unable to handle the request")
	}
	return h.RebootAPIHosts.RemoveRebootRequest(ctx, m, req)
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
	rh := &failRemoveOnce{RebootAPIHosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
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
	//lint:ignore SA1019 a controller that sets the deprecated Requeue is still requeued: the test must see it
	if err == nil && res.RequeueAfter == 0 && !res.Requeue && (held || a.Has("m1")) {
		t.Fatalf("deleted m1's request removal failed (h1 held %v, admission kept %v) but the controller returned no error and no requeue (%+v): "+
			"nothing wakes a deleted Machine again, h1 stays off and its storm-guard slot taken for good", held, a.Has("m1"), res)
	}
}

// TestReview40b_DeletedWhileDownAbandonedBySweep: the kube variant of
// remediation's TestReview40i_DeletedWhileDownNeverAbandoned. A Machine
// deleted mid-remediation while no manager runs is in no Machine event
// when the manager starts (the informer lists the Machines that exist),
// and the host watch maps a host only to existing Machines: before the
// admission sweep (RemediationController.Sweep, at start and every
// SweepEvery) nothing reconciled it, its request held the host for good
// and its admission took the storm guard's slot. Ground truth: the
// BareMetalHost and the admission ConfigMap read from the API server.
func TestReview40b_DeletedWhileDownAbandonedBySweep(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-sw")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "sw-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "sw", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))
	cfg := remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond}
	first := NewRemediationReconciler(c, ns, Ownership{NoOperator: true}, cfg, remediation.MaxCount(1), time.Now)
	_, err := first.Reconcile(ctx, "sw")
	require.NoError(t, err)
	held := func() bool {
		var bmh metal3.BareMetalHost
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
		_, ok := bmh.Annotations[remediation.RebootAnnotation]
		return ok
	}
	require.True(t, held(), "precondition: the request holds host-sw")

	// The manager is down; the Machine is deleted meanwhile.
	require.NoError(t, c.Delete(ctx, m))

	mgr := namespacedManager(t, ns)
	rem := NewRemediationReconciler(mgr.GetClient(), ns, Ownership{NoOperator: true}, cfg, remediation.MaxCount(1), time.Now)
	require.NoError(t, (&RemediationController{Name: "remediation-" + ns, Reconciler: rem, Namespace: ns, SweepEvery: time.Second}).SetupWithManager(mgr))
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	adm := &Admissions{Client: c, Namespace: ns}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := adm.GetAdmissions(ctx)
		require.NoError(t, err)
		if !held() && !a.Has("sw") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Machine sw was deleted mid-remediation while the manager was down; 20 s after it started host-sw is still held (%v) and sw admitted (%v, requests %v)",
				held(), a.Machines, a.Requests)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
