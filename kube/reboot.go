package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/reboot"
)

// StatusAnnotation holds the reboot package's Status on the
// BareMetalHost, as JSON. It is an annotation, not a status field, so that
// the status is written in the same request as the removal of the reboot
// annotations (the seed's "atomic" promise): the object's status
// subresource is a separate write, and it belongs to the baremetal-operator.
const StatusAnnotation = "reboot.rebootkit.io/status"

// RebootHosts is a reboot.HostStore over the BareMetalHosts of one
// namespace. Writes are updates with the resourceVersion read, so a
// concurrent writer's change is never overwritten: the API server's
// conflict is returned as reboot.ErrConflict, a missing host as
// reboot.ErrNotFound.
type RebootHosts struct {
	Client    client.Client
	Namespace string
}

var _ reboot.HostStore = (*RebootHosts)(nil)

// Deprovisioned reports whether a BareMetalHost is deprovisioned or being
// deprovisioned (the reboot package then removes every reboot annotation
// and leaves its power to provisioning).
func Deprovisioned(h *metal3.BareMetalHost) bool {
	switch h.Status.Provisioning.State {
	case metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, metal3.StateDeleting:
		return true
	}
	return !h.DeletionTimestamp.IsZero()
}

// Get implements reboot.HostStore.
func (s *RebootHosts) Get(ctx context.Context, name string) (reboot.Host, error) {
	var bmh metal3.BareMetalHost
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &bmh); err != nil {
		return reboot.Host{}, mapError("get", s.Namespace, name, err)
	}
	return toHost(&bmh)
}

func toHost(bmh *metal3.BareMetalHost) (reboot.Host, error) {
	h := reboot.Host{Name: bmh.Name, Version: bmh.ResourceVersion, Annotations: maps.Clone(bmh.Annotations),
		Online: bmh.Spec.Online, Deprovisioned: Deprovisioned(bmh)}
	if raw, ok := bmh.Annotations[StatusAnnotation]; ok && raw != "" {
		if err := json.Unmarshal([]byte(raw), &h.Status); err != nil {
			return reboot.Host{}, fmt.Errorf("kube: host %s/%s: annotation %s: %w", bmh.Namespace, bmh.Name, StatusAnnotation, err)
		}
	}
	delete(h.Annotations, StatusAnnotation)
	return h, nil
}

// Update implements reboot.HostStore: one update of the object's metadata
// (the reboot annotations and the status annotation together), with the
// resourceVersion h was read at.
func (s *RebootHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	var bmh metal3.BareMetalHost
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: h.Name}, &bmh); err != nil {
		return reboot.Host{}, mapError("update", s.Namespace, h.Name, err)
	}
	if bmh.ResourceVersion != h.Version {
		return reboot.Host{}, fmt.Errorf("kube: host %s/%s: %w", s.Namespace, h.Name, reboot.ErrConflict)
	}
	raw, err := json.Marshal(h.Status)
	if err != nil {
		return reboot.Host{}, err
	}
	ann := withKey(h.Annotations, StatusAnnotation, string(raw))
	// A merge patch of the annotations with the resourceVersion h was read
	// at: the API server refuses it if anyone wrote since, and nothing but
	// the annotations changed is written.
	if err := s.Client.Patch(ctx, &bmh, casPatch(h.Version, metadataPatch(nil, mapPatch(bmh.Annotations, ann)))); err != nil {
		return reboot.Host{}, mapError("update", s.Namespace, h.Name, err)
	}
	return toHost(&bmh)
}

// mapError maps API errors to the reboot package's sentinels.
func mapError(op, ns, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, reboot.ErrNotFound)
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, reboot.ErrConflict)
	}
	return fmt.Errorf("kube: %s host %s/%s: %w", op, ns, name, err)
}
