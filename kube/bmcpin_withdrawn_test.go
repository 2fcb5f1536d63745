package kube

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestBMCReplacedAfterHoldWithdrawnNormalPath is
// TestReview39c_BMCReplacedAfterRequestLocksHostOut on the normal path: a
// keyed request holds a host off through its BMC; the administrator
// replaces the BMC (the reboot-client admission policy is not installed)
// and removes the request. No reboot is pending any more, so the old pin
// must go (the host powered back on through it), and once the new BMC is
// accepted the host must be reached through it; the pass of the
// reboot package asks for the power controller (checkPin: ErrBMCChanged)
// before it decides, so without the controller's clearing of the pin of
// a host that carries no request, the host is locked out for good.
// Ground truth: the new BMC's hardware.
func TestBMCReplacedAfterHoldWithdrawnNormalPath(t *testing.T) {
	needAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct := adminClient(t)
	ns := newNamespace(t, direct)
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{})
	hw2 := fake.NewPower(time.Now, fake.PowerConfig{})
	srv1 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw1, "admin", "pw-1"))
	defer srv1.Close()
	srv2 := httptest.NewServer(redfishtest.NewBMC(time.Now, hw2, "admin", "pw-1"))
	defer srv2.Close()
	newBMH(t, direct, ns, "h1")
	require.NoError(t, direct.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h1-bmc", Labels: map[string]string{BMCHostLabel: "h1"}},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw-1")}}))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = redfishAt(srv1) }))
	const stale = 500 * time.Millisecond
	mgr := namespacedManager(t, ns)
	powers := &Powers{WithoutAdmissionPolicy: true, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: ns, Timeout: 5 * time.Second,
		PolicyName: "not-installed-" + ns, PolicySettle: time.Second, StaleReads: stale,
		Pool: power.NewPool(power.PoolConfig{CallTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})}
	defer powers.Close()
	rr := &reboot.Reconciler{Hosts: &RebootHosts{Client: mgr.GetClient(), Namespace: ns}, Now: time.Now, Power: powers.Controller,
		Config: reboot.Config{StaleReads: stale, RetryDelay: stale, SoftTimeout: time.Second}}
	rec := events.NewFakeRecorder(1000)
	require.NoError(t, (&RebootController{Name: "reboot-" + ns, Reconciler: rr, Namespace: ns, Recorder: rec,
		IdlePoll: 200 * time.Millisecond, Ownership: Ownership{NoOperator: true}}).SetupWithManager(mgr))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	const hold = reboot.AnnotationPrefix + "fencer"
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, hold, `{"mode":"hard"}`)
	}))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 20*time.Millisecond, "held off")
	var record v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC != nil
	}, 5*time.Second, 20*time.Millisecond, "premise: the hold pins the BMC")
	// The administrator replaces the BMC and withdraws the hold.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, hold)
	}))
	hw2.OutOfBandOff() // the new BMC's host is the same machine, off
	assert.Eventually(t, func() bool {
		return direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record) == nil && record.Spec.BMC == nil
	}, 5*time.Second, 50*time.Millisecond, "no reboot pending: the old pin goes; events %q", drainEvents(rec))
	// The pinned BMC reads Off: the host is powered back on through it,
	// never through the unaccepted new one (issue 39 round 9); the
	// administrator accepts the new BMC.
	assert.Eventually(t, func() bool { return hw1.WasOnAt(time.Now()) }, 10*time.Second, 50*time.Millisecond,
		"released: the host is powered back on through its pinned BMC; events %q", drainEvents(rec))
	assert.Empty(t, hw2.Calls(), "no call to the new BMC before it is accepted")
	acceptBMC(t, ctx, direct, ns, "h1", 5*time.Second)
	assert.Eventually(t, func() bool { return hw2.WasOnAt(time.Now()) }, 10*time.Second, 50*time.Millisecond,
		"accepted, spec.online true: the host is powered on through its new BMC; events %q", drainEvents(rec))
}
