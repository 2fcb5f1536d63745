package kube

import (
	"context"
	"strconv"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// operatorWorld is the scene of the reviews of remediation through the
// baremetal-operator (review 40 rounds k-m): BareMetalHosts h1..hn in a
// fresh namespace of the API server, on in a status the operator wrote an
// hour ago; a fake cluster with Machines m1..mn (uid-mi), their Nodes
// Ready, mi on hi while it exists (a deleted Machine: ErrNotFound, as
// HostOfMachine); and a Reconciler of that cluster whose hosts are
// OperatorHosts (StaleReads stale), with MaxCount(1), polling every 50 ms,
// Timeout an hour.
type operatorWorld struct {
	t   *testing.T
	c   client.Client
	ns  string
	cl  *fake.Cluster
	rem *remediation.Reconciler
}

// newOperatorWorld sets the scene with n hosts and Machines; status (nil:
// nothing) adds to the hosts' first status.
func newOperatorWorld(t *testing.T, n int, stale time.Duration, status func(*metal3.BareMetalHostStatus)) *operatorWorld {
	t.Helper()
	needAPIServer(t)
	c := adminClient(t)
	ns := newNamespace(t, c)
	hostOfM := map[string]string{}
	for i := 1; i <= n; i++ {
		newBMH(t, c, ns, "h"+strconv.Itoa(i))
		hostOfM["m"+strconv.Itoa(i)] = "h" + strconv.Itoa(i)
	}
	for i := 1; i <= n; i++ {
		setStatus(t, c, ns, "h"+strconv.Itoa(i), func(st *metal3.BareMetalHostStatus) {
			st.PoweredOn = true
			if status != nil {
				status(st)
			}
			st.LastUpdated = &metav1.Time{Time: time.Now().Add(-time.Hour)}
		})
	}
	cl := fake.NewCluster()
	for i := 1; i <= n; i++ {
		m := "m" + strconv.Itoa(i)
		cl.AddMachine(remediation.Machine{Name: m, UID: "uid-" + m, NodeName: m, Cluster: "c"})
	}
	for i := 1; i <= n; i++ {
		cl.PutNode(remediation.Node{Name: "m" + strconv.Itoa(i), UID: "n" + strconv.Itoa(i), Ready: true})
	}
	hostOf := func(ctx context.Context, m string) (string, error) {
		if _, err := cl.Get(ctx, m); err != nil {
			return "", err // a deleted Machine: ErrNotFound, as HostOfMachine
		}
		return hostOfM[m], nil
	}
	rem := &remediation.Reconciler{Machines: cl, Nodes: cl.Nodes(), Admissions: cl, Now: time.Now,
		Hosts: &OperatorHosts{Client: c, Namespace: ns, HostOf: hostOf, StaleReads: stale},
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond, Timeout: time.Hour}}
	return &operatorWorld{t: t, c: c, ns: ns, cl: cl, rem: rem}
}

// unhealthy marks Machine m's Node not Ready and m as needing
// remediation.
func (w *operatorWorld) unhealthy(m string) {
	w.cl.SetNodeReady(m, false)
	w.cl.SetNeedsRemediation(m, true)
}

// get reads BareMetalHost name into h.
func (w *operatorWorld) get(ctx context.Context, name string, h *metal3.BareMetalHost) {
	w.t.Helper()
	require.NoError(w.t, w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, h))
}

// requested tells whether BareMetalHost name carries a reboot request.
func (w *operatorWorld) requested(ctx context.Context, name string) bool {
	w.t.Helper()
	var h metal3.BareMetalHost
	w.get(ctx, name, &h)
	_, ok := h.Annotations[remediation.RebootAnnotation]
	return ok
}

// firstRequest runs m1's first pass, which must succeed, and returns h1
// as read after it (m1's request must be on it) and the time the pass
// ended.
func (w *operatorWorld) firstRequest(ctx context.Context) (h metal3.BareMetalHost, requestAt time.Time) {
	w.t.Helper()
	_, err := w.rem.Reconcile(ctx, "m1")
	require.NoError(w.t, err)
	requestAt = time.Now()
	w.get(ctx, "h1", &h)
	require.Contains(w.t, h.Annotations, remediation.RebootAnnotation, "precondition: m1's request is on h1")
	return h, requestAt
}

// statusLater writes host's status as the operator would a little more
// than a second from now (after any status written so far): powered on
// or not, with more (nil: nothing) applied, updated at the time of the
// write.
func (w *operatorWorld) statusLater(host string, on bool, more func(*metal3.BareMetalHostStatus)) {
	w.t.Helper()
	time.Sleep(1100 * time.Millisecond)
	setStatus(w.t, w.c, w.ns, host, func(st *metal3.BareMetalHostStatus) {
		st.PoweredOn = on
		if more != nil {
			more(st)
		}
		st.LastUpdated = &metav1.Time{Time: time.Now()}
	})
}

// deleteMachine deletes Machine m and runs passes passes of it, logged.
func (w *operatorWorld) deleteMachine(ctx context.Context, m string, passes int) {
	w.t.Helper()
	require.NoError(w.t, w.cl.Delete(ctx, m))
	for i := 0; i < passes; i++ {
		_, err := w.rem.Reconcile(ctx, m)
		w.t.Logf("%s gone: %v", m, err)
	}
}

// secondUnhealthy makes m2 unhealthy, runs its pass (logged) and returns
// the admission record after it.
func (w *operatorWorld) secondUnhealthy(ctx context.Context) remediation.Admissions {
	w.t.Helper()
	w.unhealthy("m2")
	_, err := w.rem.Reconcile(ctx, "m2")
	w.t.Logf("m2's pass: %v", err)
	adm, _ := w.cl.GetAdmissions(ctx)
	return adm
}
