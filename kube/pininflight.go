package kube

import (
	"cmp"
	"context"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

// withdrawnWait reports whether a pass of bmh (rec its RebootRecord, if
// exists) must wait, and for how long, before it goes through checkPin's
// rule for withdrawn requests (spec.bmc not the pinned one, no request):
// while a call of the host runs in the background (Async), or may still
// land (its answer was lost: until the reboot package's LostLanding after
// its return). checkPin reads the pinned BMC and counts its Off only
// StaleReads after the pass that first found the requests gone; a pass
// made while a power-on is in flight would anchor that at a decision
// time before the power-on lands, and the Off it then reads may echo the
// host off from before it. Waiting here anchors it at the call's return
// (or its lost landing). The end of an in-flight call requeues the host
// (Async.Done).
func (c *RebootController) withdrawnWait(bmh *metal3.BareMetalHost, rec *v1alpha1.RebootRecord, exists bool) (time.Duration, bool) {
	if c.Async == nil || !exists || rec.Spec.HostUID != string(bmh.UID) || rec.Spec.BMC == nil ||
		samePin(bmh, rec.Spec.BMC) || carriesRequest(bmh) {
		return 0, false
	}
	now := time.Now()
	until, settled := c.Async.Settled(bmh.Name, reboot.LostLandingOf(c.Reconciler.Config), now)
	if settled {
		return 0, false
	}
	if until.IsZero() {
		return cmp.Or(c.IdlePoll, time.Minute), true // in flight: its end requeues the host
	}
	return until.Sub(now), true
}

// normalWithdrawnWait is withdrawnWait for a pass of the normal path
// (the record read through the Reconciler's RebootHosts).
func (c *RebootController) normalWithdrawnWait(ctx context.Context, bmh *metal3.BareMetalHost) (time.Duration, bool) {
	hosts, ok := c.Reconciler.Hosts.(*RebootHosts)
	if !ok || c.Async == nil {
		return 0, false
	}
	var rec v1alpha1.RebootRecord
	err := hosts.Client.Get(ctx, types.NamespacedName{Namespace: hosts.Namespace, Name: bmh.Name}, &rec)
	return c.withdrawnWait(bmh, &rec, err == nil)
}
