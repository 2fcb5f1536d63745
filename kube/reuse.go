package kube

import (
	"context"
	"fmt"
	"maps"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/nodereuse"
)

// Annotations and labels the node-reuse store reads.
const (
	// UnhealthyAnnotation marks a host a health check found unhealthy
	// (the metal3 Cluster API provider's annotation).
	UnhealthyAnnotation = "capm3.metal3.io/unhealthy"
	// FailureDomainLabel is a host's failure domain.
	FailureDomainLabel = "infrastructure.cluster.x-k8s.io/failure-domain"
)

// ReuseHosts is a nodereuse.HostStore over the BareMetalHosts of one
// namespace: labels (nodereuse.Label marks reuse), provisioning state,
// consumer reference, deletion, error, paused or detached
// (baremetalhost.metal3.io/paused, /detached), unhealthy
// (UnhealthyAnnotation), failure domain (FailureDomainLabel). Claim and
// SetLabel are updates with the resourceVersion listed: a host changed or
// claimed since is nodereuse.ErrConflict, never a second claim.
type ReuseHosts struct {
	Client    client.Client
	Namespace string
	// ConsumerKind and ConsumerAPIVersion fill the consumer reference a
	// claim writes (default Metal3Machine,
	// infrastructure.cluster.x-k8s.io/v1beta1).
	ConsumerKind, ConsumerAPIVersion string
}

var _ nodereuse.HostStore = (*ReuseHosts)(nil)

// List implements nodereuse.HostStore.
func (s *ReuseHosts) List(ctx context.Context) ([]nodereuse.Host, error) {
	var hs metal3.BareMetalHostList
	if err := s.Client.List(ctx, &hs, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list hosts: %w", err)
	}
	out := make([]nodereuse.Host, 0, len(hs.Items))
	for i := range hs.Items {
		h := &hs.Items[i]
		_, paused := h.Annotations[metal3.PausedAnnotation]
		_, detached := h.Annotations[metal3.DetachedAnnotation]
		_, unhealthy := h.Annotations[UnhealthyAnnotation]
		r := nodereuse.Host{Name: h.Name, Version: h.ResourceVersion, Labels: maps.Clone(h.Labels),
			State: nodereuse.ProvisioningState(h.Status.Provisioning.State), Deleting: !h.DeletionTimestamp.IsZero(),
			Error:  h.Status.ErrorType != "" || h.Status.OperationalStatus == metal3.OperationalStatusError,
			Paused: paused || detached, Unhealthy: unhealthy, FailureDomain: h.Labels[FailureDomainLabel]}
		if h.Spec.ConsumerRef != nil {
			r.ConsumerRef = h.Spec.ConsumerRef.Name
		}
		out = append(out, r)
	}
	return out, nil
}

// change reads host name, checks its version, applies f and updates it.
//
// f returns the merge patch body of the change (only what it changes).
func (s *ReuseHosts) change(ctx context.Context, name, version string, f func(*metal3.BareMetalHost) (map[string]any, error)) error {
	var h metal3.BareMetalHost
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &h); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: host %s/%s is gone: %w", s.Namespace, name, nodereuse.ErrConflict)
		}
		return fmt.Errorf("kube: host %s/%s: %w", s.Namespace, name, err)
	}
	if h.ResourceVersion != version {
		return fmt.Errorf("kube: host %s/%s changed: %w", s.Namespace, name, nodereuse.ErrConflict)
	}
	body, err := f(&h)
	if err != nil {
		return err
	}
	if err := s.Client.Patch(ctx, &h, casPatch(version, body)); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("kube: host %s/%s: %w", s.Namespace, name, nodereuse.ErrConflict)
		}
		return fmt.Errorf("kube: host %s/%s: %w", s.Namespace, name, err)
	}
	return nil
}

// Claim implements nodereuse.HostStore.
func (s *ReuseHosts) Claim(ctx context.Context, name, version, consumer string, removeLabel bool) error {
	return s.change(ctx, name, version, func(h *metal3.BareMetalHost) (map[string]any, error) {
		if h.Spec.ConsumerRef != nil {
			return nil, fmt.Errorf("kube: host %s/%s is claimed by %s: %w", s.Namespace, name, h.Spec.ConsumerRef.Name, nodereuse.ErrConflict)
		}
		kind, api := s.ConsumerKind, s.ConsumerAPIVersion
		if kind == "" {
			kind = "Metal3Machine"
		}
		if api == "" {
			api = "infrastructure.cluster.x-k8s.io/v1beta1"
		}
		body := map[string]any{"spec": map[string]any{"consumerRef": &corev1.ObjectReference{Kind: kind, APIVersion: api, Name: consumer, Namespace: s.Namespace}}}
		if _, ok := h.Labels[nodereuse.Label]; ok && removeLabel {
			body["metadata"] = map[string]any{"labels": map[string]any{nodereuse.Label: nil}}
		}
		return body, nil
	})
}

// SetLabel implements nodereuse.HostStore.
func (s *ReuseHosts) SetLabel(ctx context.Context, name, version, value string) error {
	return s.change(ctx, name, version, func(*metal3.BareMetalHost) (map[string]any, error) {
		return metadataPatch(map[string]any{nodereuse.Label: value}, nil), nil
	})
}
