package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_OperatorHostsClearedReadsOtherPowerOff: round 21 makes a
// cleared (none) remediation read its old host with no T until a request
// of its is found there (held.go LastRequest: Value RebootValue(uid, 0),
// At zero, Host State.Host), so that "no reboot pending on the host, and
// no power-off of it, whoever asked, is read against the Machine"
// (doc.go; the fix for TestReview40_ClearedMovedMachineBlockedByReusedOldHost).
// remediation.RebootAPIHosts reads the power evidence only for
// "req.Value != "" && !req.At.IsZero()"; the kube module's OperatorHosts
// (kube/operator.go read) reads it for any "req.Value != """: with At
// zero, readLate is true (now-StaleReads is after year 1), so "since" is
// true and OffAfterRequest = !status.poweredOn: any power-off of the old
// host reads as off after the Machine's request. m1's failure on h2 was
// cleared (h2 on, its request gone) and m1 was re-provisioned on h3; h2
// went back to the pool and is off for an operator's reboot (its own
// annotation, not m1's). m1, unhealthy on h3, is not power-cycled: Decide
// waits for h2 (moveBlocked: "host h2, which the machine no longer maps
// to, may still be off for the last request") until Timeout, and then
// fails (with an owner: the Machine is deleted), every time h2 is off.
func TestReview40_OperatorHostsClearedReadsOtherPowerOff(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h2")
	newBMH(t, c, ns, "h3")
	// h2: an operator's reboot of it (not m1's request), the host off.
	require.NoError(t, change(ctx, c, ns, "h2", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, remediation.RebootAnnotation, "operator maintenance")
	}))
	setStatus(t, c, ns, "h2", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = false
		st.LastUpdated = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	})
	setStatus(t, c, ns, "h3", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = true
		st.LastUpdated = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	})
	s := &OperatorHosts{Client: c, Namespace: ns, HostOf: func(context.Context, string) (string, error) { return "h3", nil }}

	t1 := time.Now().Add(-2 * time.Hour)
	m := remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", Cluster: "c", NeedsRemediation: true}
	st := remediation.State{Phase: remediation.PhaseNone, Attempt: 2, Started: t1, RequestedAt: t1, Host: "h2", Finished: t1.Add(30 * time.Second)}
	req := remediation.LastRequest(m, st)
	require.True(t, req.At.IsZero(), "precondition: a cleared remediation reads its old host with no T")
	h, err := s.Get(ctx, "m1", req)
	require.NoError(t, err)
	d := remediation.Decide(remediation.Observed{Machine: m, Node: remediation.Node{Name: "m1", UID: "n1", Exists: true}, Host: h, State: st, MayStart: true}, time.Now())
	t.Logf("reading of h2 for m1's cleared remediation: %+v; decision: phase %s reason %q", h, d.State.Phase, d.Reason)
	if h.OffAfterRequest || h.RebootPending || strings.Contains(d.Reason, "host h2") {
		t.Fatalf("a cleared remediation's old host h2, off for an operator's reboot only, is read against m1 (OffAfterRequest %v, RebootPending %v): m1 on h3 is not power-cycled (phase %s, %q)",
			h.OffAfterRequest, h.RebootPending, d.State.Phase, d.Reason)
	}
}
