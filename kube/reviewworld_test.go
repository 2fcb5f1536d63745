package kube

import (
	"context"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
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

// redfishBMC serves hw as a Redfish BMC (user admin, password pw-1) until
// the test's end.
func redfishBMC(t *testing.T, hw *fake.Power) *httptest.Server {
	srv := httptest.NewServer(redfishtest.NewBMC(time.Now, hw, "admin", "pw-1"))
	t.Cleanup(srv.Close)
	return srv
}

// newCredentialedBMH creates BareMetalHost name in ns with its BMC
// credentials Secret (name-bmc: admin, pw-1) and, with bmc not nil,
// spec.bmc at bmc's address.
func newCredentialedBMH(t *testing.T, ctx context.Context, c client.Client, ns, name string, bmc *httptest.Server) {
	t.Helper()
	newBMH(t, c, ns, name)
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bmc", Labels: map[string]string{BMCHostLabel: name}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	if bmc != nil {
		require.NoError(t, change(ctx, c, ns, name, func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(bmc) }))
	}
}

// pinPending creates host name's RebootRecord with a reboot pending since
// now, pinned to bmc with the host's credentials, and returns the host as
// read before.
func pinPending(t *testing.T, ctx context.Context, c client.Client, ns, name string, bmc *httptest.Server) metal3.BareMetalHost {
	t.Helper()
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &bmh))
	pin := &v1alpha1.BMCPin{Address: redfishAt(bmc), CredentialsName: bmh.Spec.BMC.CredentialsName,
		PendingSince: time.Now().UTC().Format(time.RFC3339Nano)}
	require.NoError(t, c.Create(ctx, &v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), BMC: pin}}))
	return bmh
}

// directPowers is a Powers reading c itself (no cache) with no admission
// policy installed, BMC calls of 3 s at most, StaleReads stale; closed at
// the test's end.
func directPowers(t *testing.T, c client.Client, ns string, stale time.Duration) *Powers {
	p := &Powers{WithoutAdmissionPolicy: true, Client: c, Secrets: c, Namespace: ns, PolicyName: "not-installed-" + ns, PolicySettle: time.Second,
		StaleReads: stale,
		Pool:       power.NewPool(power.PoolConfig{CallTimeout: 3 * time.Second, ConnectTimeout: 3 * time.Second})}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// busyPinWorld is the scene of the reviews of a pending reboot's pin under
// a running reboot controller (review 39 rounds f-g): host h1 in a fresh
// namespace on its BMC 1 (hw1, srv1; with busy set, hw1 refuses every Off
// as busy), a manager on the namespace and its Powers (no admission
// policy, StaleReads stalePin); start runs the controller.
type busyPinWorld struct {
	t      *testing.T
	direct client.Client
	ns     string
	busy   *atomic.Bool
	hw1    *fake.Power
	srv1   *httptest.Server
	mgr    manager.Manager
	powers *Powers
	rec    *events.FakeRecorder
}

// stalePin is busyPinWorld's StaleReads and RetryDelay.
const stalePin = 300 * time.Millisecond

// newBusyPinWorld sets the scene, busy set.
func newBusyPinWorld(t *testing.T, ctx context.Context) *busyPinWorld {
	t.Helper()
	w := &busyPinWorld{t: t, direct: adminClient(t), busy: &atomic.Bool{}}
	w.ns = newNamespace(t, w.direct)
	w.busy.Store(true)
	w.hw1 = fake.NewPower(time.Now, fake.PowerConfig{Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOff && w.busy.Load() {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		return fake.Fault{}
	}})
	w.srv1 = redfishBMC(t, w.hw1)
	newCredentialedBMH(t, ctx, w.direct, w.ns, "h1", w.srv1)
	w.mgr = namespacedManager(t, w.ns)
	w.powers = &Powers{WithoutAdmissionPolicy: true, Client: w.mgr.GetClient(), Secrets: w.mgr.GetAPIReader(), Namespace: w.ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + w.ns, PolicySettle: time.Second,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	t.Cleanup(func() { _ = w.powers.Close() })
	return w
}

// start runs the reboot controller, its power controllers from powerOf,
// until ctx is canceled; the test's end cancels ctx with cancel and waits
// for the manager.
func (w *busyPinWorld) start(ctx context.Context, cancel context.CancelFunc, powerOf func(string) (power.Controller, error)) {
	w.t.Helper()
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: w.mgr.GetClient(), Namespace: w.ns}, Now: time.Now, Power: powerOf,
		Config: reboot.Config{StaleReads: stalePin, RetryDelay: stalePin, SoftTimeout: time.Second}}
	w.rec = events.NewFakeRecorder(1000)
	require.NoError(w.t, (&RebootController{Name: "reboot-" + w.ns, Reconciler: rr, Namespace: w.ns, Recorder: w.rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(w.mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.mgr.Start(ctx) }()
	w.t.Cleanup(func() { cancel(); wg.Wait() })
}

// record is h1's RebootRecord read directly (empty if there is none).
func (w *busyPinWorld) record(ctx context.Context) v1alpha1.RebootRecord {
	var r v1alpha1.RebootRecord
	_ = w.direct.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "h1"}, &r)
	return r
}

// request puts a reboot request with value on h1.
func (w *busyPinWorld) request(ctx context.Context, value string) {
	w.t.Helper()
	require.NoError(w.t, change(ctx, w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) { metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, value) }))
}

// requestPinned puts a bare reboot request on h1 and waits (up to wait)
// for the record to pin BMC 1 for it.
func (w *busyPinWorld) requestPinned(ctx context.Context, wait time.Duration) {
	w.t.Helper()
	w.request(ctx, "")
	require.Eventually(w.t, func() bool {
		r := w.record(ctx)
		return r.Spec.BMC != nil && r.Spec.BMC.Address == redfishAt(w.srv1) && r.Spec.Status != ""
	}, wait, 20*time.Millisecond, "premise: the request pins the BMC")
}

// resetOnly sets h1's spec.disablePowerOff, waits (up to wait) for the
// reset path to answer the request, and a second more.
func (w *busyPinWorld) resetOnly(ctx context.Context, wait time.Duration) {
	w.t.Helper()
	require.NoError(w.t, change(ctx, w.direct, w.ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	require.Eventually(w.t, func() bool {
		_, pending := hostAnnotations(w.t, ctx, w.direct, w.ns)[reboot.Annotation]
		return !pending
	}, wait, 20*time.Millisecond, "premise: the reset path answers the request")
	time.Sleep(time.Second)
}

// answered tells whether h1's reboot request is answered (removed) within
// 15 s; it does not fail the test by itself.
func (w *busyPinWorld) answered(ctx context.Context) bool {
	return assert.Eventually(w.t, func() bool {
		_, pending := hostAnnotations(w.t, ctx, w.direct, w.ns)[reboot.Annotation]
		return !pending
	}, 15*time.Second, 50*time.Millisecond)
}

// callsAfter counts hw's calls after at.
func callsAfter(hw *fake.Power, at time.Time) int {
	n := 0
	for _, c := range hw.Calls() {
		if c.At.After(at) {
			n++
		}
	}
	return n
}
