package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReviewSgab_OperatorHostsGoneMemberNoTimeParkedHostHoldsForEver:
// TestReviewSgaa_GoneMemberNoTimeParkedHostHoldsForEver (finding 1 of the
// first round) through kube's OperatorHosts, the HostStore of hosts the
// baremetal-operator powers. m0 is gone; its admission (an earlier
// version's Member: PrevHost h1, no PrevHostSince) records a request
// without a time (a failed remediation cleared). h1 is a provisioned
// host its owner keeps powered off (spec.online false, status.poweredOn
// false, written ten minutes ago), long after any request of m0's:
// ground truth off for its owner, not for m0. The fix (226c4f6) bounds
// the no-time fallback by Host.OnConfirmedAt, which OperatorHosts never
// sets (always zero), so readMembersPrev reads h1 from knownEarliest:
// readLate is true, OffAfterRequest = !poweredOn, and m0's admission is
// kept for as long as h1 is parked; m2, unhealthy on a healthy host, is
// never admitted (limit 1) while no host is off for any remediation.
func TestReviewSgab_OperatorHostsGoneMemberNoTimeParkedHostHoldsForEver(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t0 := clk.Now()
	bmh := func(name string, online, on bool, updated time.Time) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		h.Spec.Online = online
		h.Status.PoweredOn = on
		h.Status.Provisioning.State = metal3.StateProvisioned
		h.Status.LastUpdated = &metav1.Time{Time: updated}
		return h
	}
	c := crfake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&metal3.BareMetalHost{}).
		WithObjects(bmh("h0", true, true, t0.Add(-2*time.Hour)), bmh("h1", false, false, t0.Add(-10*time.Minute)), bmh("h2", true, true, t0.Add(-2*time.Hour))).Build()
	cl := fake.NewCluster()
	cl.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	cl.PutNode(remediation.Node{Name: "m2", UID: "n-m2", Ready: false})
	cl.SetNeedsRemediation("m2", true)
	a, err := cl.GetAdmissions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Machines = []string{"m0"}
	a.Requests = map[string]remediation.Request{"m0": {Value: remediation.RebootValue("uid-m0", time.Time{}), Host: "h0"}}
	a.Members = map[string]remediation.Member{"m0": {Cluster: "c", Wrote: true, PrevHost: "h1"}}
	if err := cl.PutAdmissions(ctx, a); err != nil {
		t.Fatal(err)
	}
	rem := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Admissions: cl, Now: clk.Now,
		Hosts: &OperatorHosts{Client: c, Namespace: "ns", Now: clk.Now,
			HostOf: func(_ context.Context, m string) (string, error) { return "h" + m[1:], nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{Timeout: 3 * time.Minute, MinHealthyPeriod: 20 * time.Minute}}
	var lastErr error
	for i := 0; i < 360; i++ { // an hour of 10 s passes
		clk.Advance(10 * time.Second)
		for _, m := range []string{"m0", "m2"} {
			if _, err := rem.Reconcile(ctx, m); err != nil && m == "m0" {
				lastErr = err
			}
		}
		adm, _ := cl.GetAdmissions(ctx)
		if !adm.Has("m0") && adm.Has("m2") {
			return
		}
	}
	adm, _ := cl.GetAdmissions(ctx)
	rec2, _ := cl.Get(ctx, "m2")
	t.Fatalf("after an hour: admissions %v (h1 parked off by its owner since before the hour, no host off for any remediation); m0's last pass: %v; m2: %s %q",
		adm.Machines, lastErr, rec2.State.Phase, rec2.State.Message)
}
