package kube

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
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
	ctx := context.Background()
	w := startPinWorld39(t, ctx, pinOpts39{stale: 500 * time.Millisecond, powersStale: true})
	direct, ns, hw1, hw2, srv2, rec := w.direct, w.ns, w.hw1, w.hw2, w.srv2, w.rec

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
