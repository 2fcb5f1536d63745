package kube

import (
	"context"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

// firstSight is checkPin for a host with no RebootRecord of its own (old:
// an earlier host's of the same name, or nil): the first pass that asks
// for the host's power controller, before any of its requests is acted
// on, records spec.bmc as the host's LastBMC in a new record (an earlier
// host's record is replaced, its reset state dropped), so that a later
// change of spec.bmc is judged against it (checkLast) even if the host
// was never rebooted. Without it, a reboot client could redirect spec.bmc
// of a host rebootkit manages but never rebooted, and the first request
// would pin the client's endpoint (issue 39). spec.bmc is used: what it
// was before this first sight is not known (the window doc.go names).
// A Client that cannot write records nothing. checkPin calls it only once
// a power-on through a pinned BMC of the earlier host can no longer land
// (sentHold on old, resolvedHold in memory): the rewrite drops old's
// PowerOnSent.
func (p *Powers) firstSight(ctx context.Context, bmh *metal3.BareMetalHost, old *v1alpha1.RebootRecord) error {
	w, ok := p.Client.(client.Writer)
	if !ok {
		return nil
	}
	owner := []metav1.OwnerReference{{APIVersion: metal3.GroupVersion.String(), Kind: "BareMetalHost",
		Name: bmh.Name, UID: bmh.UID, BlockOwnerDeletion: ptr.To(false)}}
	last := pinOf(bmh, stamp(time.Now()))
	if old == nil {
		rec := v1alpha1.RebootRecord{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: bmh.Name, OwnerReferences: owner},
			Spec: v1alpha1.RebootRecordSpec{HostUID: string(bmh.UID), LastBMC: last}}
		err := w.Create(ctx, &rec)
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile (by a pass of another path): the host is
			// judged against it at the next pass.
			return fmt.Errorf("kube: reboot record %s/%s: %w", p.Namespace, bmh.Name, reboot.ErrConflict)
		}
		if err != nil {
			return mapError("record of", p.Namespace, bmh.Name, err)
		}
		return nil
	}
	spec := map[string]any{"hostUID": string(bmh.UID), "status": "", "bmc": nil, "bmcChanged": nil, "lastBMC": last, "powerOnThrough": nil, "powerOnSent": nil}
	err := w.Patch(ctx, old, casPatch(old.ResourceVersion, map[string]any{"spec": spec,
		"metadata": map[string]any{"annotations": nil, "ownerReferences": owner}}))
	if err != nil {
		return mapError("record of", p.Namespace, bmh.Name, err)
	}
	return nil
}

// firstSightOnly reports whether rec, bmh's record, holds nothing but
// what firstSight writes: no Status, pin, mark or reset state.
func firstSightOnly(rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost) bool {
	return rec.Spec.HostUID == string(bmh.UID) && rec.Spec.Status == "" && rec.Spec.BMC == nil && rec.Spec.BMCChanged == nil && rec.Spec.PowerOnThrough == nil &&
		rec.Annotations[ResetAnnotation] == "" && rec.Annotations[LastResetAnnotation] == ""
}
