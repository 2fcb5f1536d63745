package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// laggingCache is the manager's client as the binary builds it
// (BareMetalHosts read through the informer cache): while frozen, a
// BareMetalHost is read as the cache last delivered it, a snapshot taken
// before a write the informer has not brought yet; writes go to the API
// server. controller-runtime documents that a cached read may not show
// the caller's own write; kube/watch.go says so of this very store ("a
// cache may not yet show the request it just wrote, which it would take
// for a removed request").
type laggingCache struct {
	client.Client
	mu     sync.Mutex
	frozen map[string]*metal3.BareMetalHost
}

func (l *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if b, ok := obj.(*metal3.BareMetalHost); ok {
		l.mu.Lock()
		snap := l.frozen[key.Name]
		l.mu.Unlock()
		if snap != nil {
			snap.DeepCopyInto(b)
			return nil
		}
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// TestReview40m_CachedHostReadLeavesGoneMachineRequestForGood: the
// remediation controller's hosts (NewRemediationReconciler: RebootHosts
// and OperatorHosts over the manager's client, kube/cmd main.go:200,
// BareMetalHosts cached, UncachedObjects being only Nodes and ConfigMaps)
// are read through the cache, also to remove a request and to judge
// whether the host is still held before an admission is released. A
// Machine deleted right after its pass wrote its request (its owner
// scales it down; the Machine is read fresh, Machines.Reader) is
// abandoned while the cache does not show that request yet:
// RemoveRebootRequest reads no annotation and removes nothing, stillHeld
// reads no request and no evidence, and the admission (with the recorded
// request, the only record of it) is released. Once the cache catches up
// the request is on the host with no admission left to remove it: the
// reboot controller holds the host off for good, and the host lock and
// the storm guard count it free. Ground truth: the BareMetalHost read
// from the API server.
func TestReview40m_CachedHostReadLeavesGoneMachineRequestForGood(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	h := newBMH(t, c, ns, "host-c")
	h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "mc-m3m", Namespace: ns}
	require.NoError(t, c.Update(ctx, h))
	m := newMachine(t, c, ns, "mc", false)
	m.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
	require.NoError(t, c.Update(ctx, m))

	cache := &laggingCache{Client: c, frozen: map[string]*metal3.BareMetalHost{}}
	rem := NewRemediationReconciler(cache, ns, Ownership{NoOperator: true}, remediation.Config{Timeout: time.Minute, PollInterval: 100 * time.Millisecond},
		remediation.MaxCount(1), time.Now)
	rem.Machines.(*Machines).Reader = c // as the binary: Machines read fresh

	var before metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &before))
	_, err := rem.Reconcile(ctx, "mc")
	require.NoError(t, err)
	var bmh metal3.BareMetalHost
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	require.Contains(t, bmh.Annotations, remediation.RebootAnnotation, "precondition: mc's request is on host-c")

	// The informer has not delivered the request's write yet; the
	// Machine is deleted and its deletion reconciled.
	cache.mu.Lock()
	cache.frozen["host-c"] = before.DeepCopy()
	cache.mu.Unlock()
	require.NoError(t, c.Delete(ctx, m))
	_, err = rem.Reconcile(ctx, "mc")
	t.Logf("pass with the cache behind: %v", err)

	// The cache catches up; the controller requeues the Machine.
	cache.mu.Lock()
	delete(cache.frozen, "host-c")
	cache.mu.Unlock()
	for i := 0; i < 3; i++ {
		_, err = rem.Reconcile(ctx, "mc")
		t.Logf("pass: %v", err)
	}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(h), &bmh))
	v, onHost := bmh.Annotations[remediation.RebootAnnotation]
	adm, err := (&Admissions{Client: c, Namespace: ns}).GetAdmissions(ctx)
	require.NoError(t, err)
	if onHost && !adm.Has("mc") {
		t.Fatalf("deleted Machine mc's admission released (admissions %v) while its request %q is still on host-c (API server): the cached read showed no request, so nothing was removed and the host read as not held; no admission is left to remove it, and the reboot controller holds host-c off for good",
			adm.Machines, v)
	}
}
