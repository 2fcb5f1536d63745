package kube

import (
	"context"
	"encoding/json"
	"fmt"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rebootkit/rebootkit/remediation"
)

// RemediationStateAnnotation holds the remediation package's State of a
// Machine, as JSON (an annotation: written with compare-and-swap on the
// Machine's resourceVersion, no status subresource involved).
const RemediationStateAnnotation = "remediation.rebootkit.io/state"

// Machines is a remediation.MachineStore over the Cluster API Machines
// (core/v1beta2) of one namespace: NeedsRemediation is the annotation
// remediation.NeedsRemediationAnnotation, ControlPlane the control-plane
// label, HasControllerOwner a controller owner reference (a MachineSet or
// a control plane that will replace a deleted Machine), NodeName the
// status' nodeRef, Cluster its spec.clusterName (or cluster-name label),
// HealthCheck the MachineHealthCheck whose cluster and selector match it
// (the storm guard counts per cluster and health check). A Machine whose
// state annotation does not parse fails Get (the error names it and the
// fix) and is listed by List with no state, reported in the context's
// logger: it stops no other Machine's remediation. SaveState is a compare-and-swap on the resourceVersion
// (a conflict is remediation.ErrConflict); a missing Machine is
// remediation.ErrNotFound.
type Machines struct {
	Client    client.Client
	Namespace string
	// Reader, if set, is what Get reads the Machine with (the manager's
	// API reader: the remediation checks the persisted attempt before
	// each side effect, which a lagging cache could not tell); default
	// Client.
	Reader client.Reader
	// Retries bounds the conflicts RemoveNeedsRemediation retries (default 10).
	Retries int
}

var _ remediation.MachineStore = (*Machines)(nil)

// healthChecks are the MachineHealthChecks of a namespace, to tell which
// one watches a Machine.
type healthChecks []clusterv1.MachineHealthCheck

func (s *Machines) healthChecks(ctx context.Context) (healthChecks, error) {
	var l clusterv1.MachineHealthCheckList
	if err := s.Client.List(ctx, &l, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list machine health checks: %w", err)
	}
	return l.Items, nil
}

// of returns the name of the MachineHealthCheck watching m (same cluster,
// selector matching its labels; the first by name if several do), or "".
func (hc healthChecks) of(m *clusterv1.Machine) string {
	best := ""
	for i := range hc {
		c := &hc[i]
		if c.Spec.ClusterName != clusterOf(m) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(m.Labels)) {
			continue
		}
		if best == "" || c.Name < best {
			best = c.Name
		}
	}
	return best
}

// clusterOf is the Machine's cluster: spec.clusterName, else its
// cluster.x-k8s.io/cluster-name label.
func clusterOf(m *clusterv1.Machine) string {
	if m.Spec.ClusterName != "" {
		return m.Spec.ClusterName
	}
	return m.Labels[clusterv1.ClusterNameLabel]
}

func machineRecord(m *clusterv1.Machine, hc healthChecks) (remediation.MachineRecord, error) {
	rec := remediation.MachineRecord{Version: m.ResourceVersion, Machine: remediation.Machine{
		Name: m.Name, UID: string(m.UID), NodeName: m.Status.NodeRef.Name,
		Cluster: clusterOf(m), HealthCheck: hc.of(m),
		ControlPlane:       hasKey(m.Labels, clusterv1.MachineControlPlaneLabel),
		HasControllerOwner: metav1.GetControllerOf(m) != nil,
	}}
	_, rec.Machine.NeedsRemediation = m.Annotations[remediation.NeedsRemediationAnnotation]
	if raw := m.Annotations[RemediationStateAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec.State); err != nil {
			return rec, fmt.Errorf("kube: machine %s/%s: annotation %s is not a remediation state (fix: remove the annotation, also while its reboot request holds the host off: the next pass then removes that request, so the host is powered on; or restore its value): %w",
				m.Namespace, m.Name, RemediationStateAnnotation, err)
		}
	}
	return rec, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// Get implements remediation.MachineStore.
func (s *Machines) Get(ctx context.Context, name string) (remediation.MachineRecord, error) {
	var m clusterv1.Machine
	var rd client.Reader = s.Client
	if s.Reader != nil {
		rd = s.Reader
	}
	if err := rd.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &m); err != nil {
		return remediation.MachineRecord{}, s.mapError("get", name, err)
	}
	hc, err := s.healthChecks(ctx)
	if err != nil {
		return remediation.MachineRecord{}, err
	}
	return machineRecord(&m, hc)
}

// List implements remediation.MachineStore.
func (s *Machines) List(ctx context.Context) ([]remediation.MachineRecord, error) {
	var ms clusterv1.MachineList
	if err := s.Client.List(ctx, &ms, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list machines: %w", err)
	}
	hc, err := s.healthChecks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]remediation.MachineRecord, 0, len(ms.Items))
	for i := range ms.Items {
		rec, err := machineRecord(&ms.Items[i], hc)
		if err != nil {
			// One Machine's unreadable state stops no other remediation:
			// it is listed with no state (its remediation, if one is in
			// flight, is admitted, and the storm guard counts it by its
			// admission and its mark), and reported.
			rec.State = remediation.State{}
			logf.FromContext(ctx).Error(err, "machine listed without its remediation state", "machine", ms.Items[i].Name)
		}
		out = append(out, rec)
	}
	return out, nil
}

// SaveState implements remediation.MachineStore.
func (s *Machines) SaveState(ctx context.Context, name, version string, st remediation.State) error {
	var m clusterv1.Machine
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &m); err != nil {
		return s.mapError("save state of", name, err)
	}
	if m.ResourceVersion != version {
		return fmt.Errorf("kube: machine %s/%s: %w", s.Namespace, name, remediation.ErrConflict)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	patch := casPatch(m.ResourceVersion, metadataPatch(nil, map[string]any{RemediationStateAnnotation: string(raw)}))
	if err := s.Client.Patch(ctx, &m, patch); err != nil {
		return s.mapError("save state of", name, err)
	}
	return nil
}

// RemoveNeedsRemediation implements remediation.MachineStore (absent is
// fine), retrying conflicts from a fresh read.
func (s *Machines) RemoveNeedsRemediation(ctx context.Context, name string) error {
	retries := s.Retries
	if retries <= 0 {
		retries = 10
	}
	var err error
	for i := 0; i < retries; i++ {
		var m clusterv1.Machine
		if err = s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &m); err != nil {
			return s.mapError("update", name, err)
		}
		if _, ok := m.Annotations[remediation.NeedsRemediationAnnotation]; !ok {
			return nil
		}
		patch := casPatch(m.ResourceVersion, metadataPatch(nil, map[string]any{remediation.NeedsRemediationAnnotation: nil}))
		if err = s.Client.Patch(ctx, &m, patch); err == nil || !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return s.mapError("update", name, err)
	}
	return nil
}

// Delete implements remediation.MachineStore (a missing Machine is fine).
func (s *Machines) Delete(ctx context.Context, name string) error {
	err := s.Client.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		return s.mapError("delete", name, err)
	}
	return nil
}

func (s *Machines) mapError(op, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: %s machine %s/%s: %w", op, s.Namespace, name, remediation.ErrNotFound)
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: %s machine %s/%s: %w", op, s.Namespace, name, remediation.ErrConflict)
	}
	return fmt.Errorf("kube: %s machine %s/%s: %w", op, s.Namespace, name, err)
}

// HostOfMachine returns the BareMetalHost of a Machine: the host whose
// spec.consumerRef names the Machine's infrastructure object (its
// Metal3Machine), as the Cluster API provider for metal3 links them; ""
// if none; an error wrapping remediation.ErrNotFound if the Machine is
// gone.
func HostOfMachine(ctx context.Context, c client.Client, namespace, machine string) (string, error) {
	return hostOfMachine(ctx, c, namespace, machine, "")
}

// hostOfMachine is HostOfMachine for the Machine of that name with that
// UID (any UID if uid is ""): another Machine of the same name (the one
// meant was deleted and re-created) is not it, and has no host for the
// caller (ErrNoHost).
func hostOfMachine(ctx context.Context, c client.Client, namespace, machine string, uid types.UID) (string, error) {
	var m clusterv1.Machine
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: machine}, &m); apierrors.IsNotFound(err) {
		// remediation.ErrNotFound: a deleted Machine has no host to ask
		// for (remediation's abandon then uses the request recorded with
		// its admission), not an error retried for ever.
		return "", fmt.Errorf("kube: machine %s/%s: %w: %w", namespace, machine, remediation.ErrNotFound, err)
	} else if err != nil {
		return "", fmt.Errorf("kube: machine %s/%s: %w", namespace, machine, err)
	}
	if uid != "" && m.UID != uid {
		return "", fmt.Errorf("%w: machine %s/%s is another Machine of that name (uid %s, not %s): it was deleted and re-created, so its host is not this one's",
			ErrNoHost, namespace, machine, m.UID, uid)
	}
	infra := m.Spec.InfrastructureRef
	var hosts metal3.BareMetalHostList
	if err := c.List(ctx, &hosts, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("kube: list hosts: %w", err)
	}
	for _, h := range hosts.Items {
		if r := h.Spec.ConsumerRef; r != nil && r.Name == infra.Name && (r.Kind == "" || r.Kind == infra.Kind) {
			return h.Name, nil
		}
	}
	return "", nil
}
