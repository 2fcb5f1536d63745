package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// pauseAfterSave models a remediation leader paused between its state
// write and its side effects: the first successful SaveState blocks until
// resumed.
type pauseAfterSave struct {
	remediation.MachineStore
	saved, resume chan struct{}
	once          sync.Once
}

func (p *pauseAfterSave) SaveState(ctx context.Context, name, version string, s remediation.State) error {
	err := p.MachineStore.SaveState(ctx, name, version, s)
	if err == nil {
		first := false
		p.once.Do(func() { first = true })
		if first {
			close(p.saved)
			<-p.resume
		}
	}
	return err
}

// remediationSetup is a Machine marked for nothing yet, its host (through
// its Metal3Machine) and its Node on the API server.
func remediationSetup(t *testing.T, direct client.Client, ns, machine, host string) (nodeName string, register func() error) {
	t.Helper()
	ctx := context.Background()
	nodeName = fmt.Sprintf("node-%s-%d", machine, time.Now().UnixNano())
	h := newBMH(t, direct, ns, host)
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: machine + "-m3m", Namespace: ns}
	require.NoError(t, direct.Update(ctx, h))
	m := newMachine(t, direct, ns, machine, false)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
	require.NoError(t, direct.Status().Update(ctx, m))
	register = func() error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := direct.Create(ctx, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return direct.Status().Update(ctx, n)
	}
	require.NoError(t, register())
	return nodeName, register
}

func markForRemediation(t *testing.T, c client.Client, ns, machine string) {
	t.Helper()
	var m clusterv1.Machine
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: machine}, &m))
	require.NoError(t, c.Patch(context.Background(), &m, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+remediation.NeedsRemediationAnnotation+`":""}}}`))))
}

// TestSupersededRemediationWritesNoRebootRequest (issue 39 point 6):
// remediation leader A decides the first attempt, writes its state and is
// paused before it writes the host's reboot request. Leader B (the reboot
// and remediation controllers under leader election, the lease guard
// fencing both) takes the remediation over and finishes it: the host
// power-cycled once, the Node back, the Machine done. A resumes: its
// reboot request of the superseded attempt must not be written (its side
// effects check the persisted attempt), so the healthy host is never
// powered off again. On the old code A wrote the request: the reboot
// controller powered the healthy host off and held it off for good.
func TestSupersededRemediationWritesNoRebootRequest(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	nodeName, register := remediationSetup(t, direct, ns, "ms", "host-s")
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	rcfg := remediation.Config{Timeout: time.Minute, PollInterval: 200 * time.Millisecond}

	// A: decides, saves its state, pauses.
	a := NewRemediationReconciler(direct, ns, Ownership{NoOperator: true}, rcfg, remediation.MaxCount(1), time.Now)
	pa := &pauseAfterSave{MachineStore: a.Machines, saved: make(chan struct{}), resume: make(chan struct{})}
	a.Machines = pa
	markForRemediation(t, direct, ns, "ms")
	aDone := make(chan error, 1)
	go func() { _, err := a.Reconcile(ctx, "ms"); aDone <- err }()
	resumed := false
	defer func() {
		if !resumed {
			close(pa.resume)
		}
	}()
	select {
	case <-pa.saved:
	case err := <-aDone:
		t.Fatalf("A returned before its state write: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("A never saved its state")
	}

	// B: the leader that finishes the remediation, fenced by its lease.
	const lease, renew, retry = 3 * time.Second, 2 * time.Second, 250 * time.Millisecond
	ccfg := asController(t, ns)
	guard, err := NewLeaseGuard(ccfg, ns, "rebootkit-reboot", "b-"+ns, lease, renew)
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(ccfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:          cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Client:         client.Options{Cache: &client.CacheOptions{DisableFor: UncachedObjects()}},
		LeaderElection: true, LeaderElectionID: "rebootkit-reboot", LeaderElectionNamespace: ns,
		LeaderElectionResourceLockInterface: guard, LeaseDuration: ptrTo(lease), RenewDeadline: ptrTo(renew), RetryPeriod: ptrTo(retry)})
	require.NoError(t, err)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Guard: guard,
		Power:  func(string) (power.Controller, error) { return guard.Wrap(hw), nil },
		Config: reboot.Config{StaleReads: 300 * time.Millisecond, SoftTimeout: time.Second}}
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	b := NewRemediationReconciler(mgr.GetClient(), ns, Ownership{NoOperator: true}, rcfg, remediation.MaxCount(1), time.Now)
	b.Guard = guard
	require.NoError(t, (&RemediationController{Name: "remediation-" + ns, Reconciler: b, Namespace: ns}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	go func() { // the kubelet: registers the Node again once the host runs
		defer wg.Done()
		for ctx.Err() == nil {
			var n corev1.Node
			if err := direct.Get(ctx, types.NamespacedName{Name: nodeName}, &n); apierrors.IsNotFound(err) && hw.HardwareOn() {
				_ = register()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	ms := &Machines{Client: direct, Namespace: ns}
	deadline := time.Now().Add(90 * time.Second)
	for {
		rec, err := ms.Get(ctx, "ms")
		if err == nil && rec.State.Phase == remediation.PhaseDone && !rec.Machine.NeedsRemediation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not finish the remediation: %+v %v; power %v", rec.State, err, hw.Truth())
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, hw.HardwareOn(), "B powered the host back on")
	doneAt := time.Now()

	// A resumes.
	close(pa.resume)
	resumed = true
	select {
	case err := <-aDone:
		assert.ErrorIs(t, err, remediation.ErrConflict, "A's pass is superseded")
	case <-time.After(30 * time.Second):
		t.Fatal("A did not return")
	}
	time.Sleep(3 * time.Second) // the reboot controller's time to act on a request
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "host-s"}, &h))
	_, has := h.Annotations[remediation.RebootAnnotation]
	assert.False(t, has, "no reboot request on the host after the remediation was done")
	assert.True(t, hw.HardwareOn(), "the healthy host runs")
	offs := 0
	for _, tc := range hw.Truth() {
		if !tc.On {
			offs++
			assert.False(t, tc.At.After(doneAt), "the healthy host was powered off at %v, after the remediation was done (%v)", tc.At, doneAt)
		}
	}
	assert.Equal(t, 1, offs, "one power cycle")
}

// TestStrayRebootRequestRemovedPromptly (issue 39 point 6): a
// remediation's reboot request that no attempt owns (a superseded
// leader's write that landed, the Machine's remediation over) is removed
// within seconds: host events are mapped to their Machine. On the old code
// only Machine events started a pass, so the request stayed until the
// resync (hours), the host held off.
func TestStrayRebootRequestRemovedPromptly(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	remediationSetup(t, direct, ns, "mp", "host-p")
	mgr := namespacedManager(t, ns)
	rem := NewRemediationReconciler(mgr.GetClient(), ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute},
		remediation.MaxCount(1), time.Now)
	require.NoError(t, (&RemediationController{Name: "remediation-" + ns, Reconciler: rem, Namespace: ns}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	time.Sleep(time.Second) // the start's pass over the Machine is over

	var m clusterv1.Machine
	require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mp"}, &m))
	var h metal3.BareMetalHost
	require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "host-p"}, &h))
	h.Annotations = map[string]string{remediation.RebootAnnotation: remediation.RebootValue(string(m.UID), time.Now().Add(-time.Minute))}
	require.NoError(t, direct.Update(ctx, &h))

	deadline := time.Now().Add(10 * time.Second)
	for {
		require.NoError(t, direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "host-p"}, &h))
		if _, has := h.Annotations[remediation.RebootAnnotation]; !has {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the reboot request no attempt owns is still on the host after 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
