package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40m_OperatorEchoOnReleasesGoneMachineWhileOff: round 12's fix
// (a441da8) made Host.PoweredOn wait out an "on" status written within
// StaleReads of the request (it may echo Ironic's cached state from
// before it), but held() does not read PoweredOn alone: it reads
// OffAfterRequest || RebootPending, and for that same reading
// OperatorHosts.read sets OffAfterRequest false (the status says on) and
// RebootPending false (`!since`, and since is true for any status written
// after the request). So a remediation that is over (here: a Machine
// deleted right after its request, abandon/stillHeld) is not held by a
// reading that, by the package's own rule, cannot show the host on since
// the request: its admission is released while Ironic has the host off
// for the request, and with MaxCount(1) the next Machine is admitted and
// its host asked off: two hosts off at once. Ground truth: the stand-in
// operator's log: h1 went off after the echoed reading and was never on
// since.
func TestReview40m_OperatorEchoOnReleasesGoneMachineWhileOff(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	newBMH(t, c, ns, "h1")
	newBMH(t, c, ns, "h2")
	for _, h := range []string{"h1", "h2"} {
		setStatus(t, c, ns, h, func(st *metal3.BareMetalHostStatus) {
			st.PoweredOn = true
			st.LastUpdated = &metav1.Time{Time: time.Now().Add(-time.Hour)}
		})
	}
	cl := fake.NewCluster()
	cl.AddMachine(remediation.Machine{Name: "m1", UID: "uid-m1", NodeName: "m1", Cluster: "c"})
	cl.AddMachine(remediation.Machine{Name: "m2", UID: "uid-m2", NodeName: "m2", Cluster: "c"})
	cl.PutNode(remediation.Node{Name: "m1", UID: "n1", Ready: true})
	cl.PutNode(remediation.Node{Name: "m2", UID: "n2", Ready: true})
	hostOf := func(ctx context.Context, m string) (string, error) {
		if _, err := cl.Get(ctx, m); err != nil {
			return "", err
		}
		return map[string]string{"m1": "h1", "m2": "h2"}[m], nil
	}
	const stale = 8 * time.Second
	rem := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Admissions: cl, Now: time.Now,
		Hosts: &OperatorHosts{Client: c, Namespace: ns, HostOf: hostOf, StaleReads: stale},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Hour}}

	cl.SetNodeReady("m1", false)
	cl.SetNeedsRemediation("m1", true)
	_, err := rem.Reconcile(ctx, "m1")
	require.NoError(t, err)
	requestAt := time.Now()
	var h metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	require.Contains(t, h.Annotations, remediation.RebootAnnotation, "precondition: m1's request is on h1")

	// The operator writes a status a second after the request with
	// Ironic's cached "on" (read before the request); Ironic then powers
	// h1 off for the request. Ground truth from here: h1 off, never on
	// since within the test (this stand-in operator is slow to power on).
	time.Sleep(1100 * time.Millisecond)
	setStatus(t, c, ns, "h1", func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = true
		st.LastUpdated = &metav1.Time{Time: time.Now()}
	})
	h1OffAt := time.Now()

	// m1 is deleted (its owner scales it down, or replaces it) while its
	// request holds h1 off.
	require.NoError(t, cl.Delete(ctx, "m1"))
	for i := 0; i < 3; i++ {
		_, err := rem.Reconcile(ctx, "m1")
		t.Logf("m1 gone: %v", err)
	}
	require.Less(t, time.Since(requestAt), stale, "precondition: every read within StaleReads of the request")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h1"}, &h))
	require.True(t, h.Spec.Online, "precondition: h1's owner wants it on (not Offline)")
	cl.SetNodeReady("m2", false)
	cl.SetNeedsRemediation("m2", true)
	_, err = rem.Reconcile(ctx, "m2")
	t.Logf("m2's pass: %v", err)
	adm, _ := cl.GetAdmissions(ctx)
	var h2 metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h2"}, &h2))
	_, m2Req := h2.Annotations[remediation.RebootAnnotation]
	if !adm.Has("m1") || adm.Has("m2") || m2Req {
		t.Fatalf("limit MaxCount(1): gone m1's admission released (admissions %v) on an on status written %v after its request (within StaleReads %v, which the same store's PoweredOn refuses as a possible echo), while h1 has been off since %v and never on since (ground truth); m2 admitted, its request on h2: %v",
			adm.Machines, h1OffAt.Sub(requestAt).Round(time.Millisecond), stale, h1OffAt.Format(time.StampMilli), m2Req)
	}
}
