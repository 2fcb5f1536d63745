package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestRemediationOnAPIServer: a Machine marked for remediation, its
// BareMetalHost (through its Metal3Machine) and its Node, on a real API
// server, with the reboot and remediation controllers under one manager
// and a simulated kubelet that registers the Node again once the host
// runs: the host is powered off, the Node deleted only while the hardware
// is off (ground truth at the moment the kubelet sees it gone), the host
// powered on once, the Node back with its labels, the Machine done and
// unmarked.
func TestRemediationOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	nodeName := fmt.Sprintf("node-r-%d", time.Now().UnixNano())
	h := newBMH(t, direct, ns, "host-r")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mr-m3m", Namespace: ns}
	require.NoError(t, direct.Update(ctx, h))
	m := newMachine(t, direct, ns, "mr", false)
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
	require.NoError(t, direct.Status().Update(ctx, m))
	register := func() error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := direct.Create(ctx, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return direct.Status().Update(ctx, n)
	}
	require.NoError(t, register())
	var n corev1.Node
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Name: nodeName}, &n))
	n.Labels = map[string]string{"role": "worker"}
	require.NoError(t, direct.Update(ctx, &n))

	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 100 * time.Millisecond})
	// The controllers run as a user bound to the generated role
	// (config/rbac/role.yaml): a missing permission fails the test.
	mgr := namespacedManager(t, ns)
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now,
		Power:  func(string) (power.Controller, error) { return hw, nil },
		Config: reboot.Config{StaleReads: 500 * time.Millisecond, SoftTimeout: 2 * time.Second}}
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	rem := NewRemediationReconciler(mgr.GetClient(), ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 200 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	fc := &fenceCheck{NodeStore: rem.Nodes, hw: hw}
	rem.Nodes = fc
	require.NoError(t, (&RemediationController{Name: "remediation-" + ns, Reconciler: rem, Namespace: ns}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	// The simulated kubelet: registers the Node again when the host runs.
	var mu sync.Mutex
	var goneWhileOn, gone bool
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var cur corev1.Node
			err := direct.Get(ctx, types.NamespacedName{Name: nodeName}, &cur)
			if apierrors.IsNotFound(err) {
				on := hw.HardwareOn()
				mu.Lock()
				if !gone {
					gone, goneWhileOn = true, on
				}
				mu.Unlock()
				if on {
					_ = register()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, direct.Update(ctx, m))
	ms := &Machines{Client: direct, Namespace: ns}
	deadline := time.Now().Add(90 * time.Second)
	for {
		rec, err := ms.Get(ctx, "mr")
		if err == nil && rec.State.Phase == remediation.PhaseDone && !rec.Machine.NeedsRemediation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remediation not done: %+v %v; power %v", rec.State, err, hw.Truth())
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	assert.True(t, gone, "the Node was deleted")
	_ = goneWhileOn // the kubelet's view lags; the check is at the deletion itself
	fences, whileOn := fc.counts()
	assert.Positive(t, fences)
	assert.Zero(t, whileOn, "the Node was deleted while the host was off (ground truth at the deletion)")
	mu.Unlock()
	offs := 0
	for _, tc := range hw.Truth() {
		if !tc.On {
			offs++
		}
	}
	assert.Equal(t, 1, offs, "one power cycle")
	assert.True(t, hw.HardwareOn())
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Name: nodeName}, &n))
	assert.Equal(t, "worker", n.Labels["role"], "labels restored on the returning Node")
}

// fenceCheck wraps a NodeStore: at the instant a Node is deleted or
// tainted, the host's hardware must be off (ground truth).
type fenceCheck struct {
	remediation.NodeStore
	hw      *fake.Power
	mu      sync.Mutex
	fences  int
	whileOn int
}

func (f *fenceCheck) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences++
	if f.hw.HardwareOn() {
		f.whileOn++
	}
}

func (f *fenceCheck) Delete(ctx context.Context, name, uid string) error {
	f.check()
	return f.NodeStore.Delete(ctx, name, uid)
}

func (f *fenceCheck) SetOutOfService(ctx context.Context, name string, on bool) error {
	if on {
		f.check()
	}
	return f.NodeStore.SetOutOfService(ctx, name, on)
}

func (f *fenceCheck) counts() (fences, whileOn int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fences, f.whileOn
}
