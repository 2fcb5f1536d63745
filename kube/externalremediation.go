package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/remediation"
)

// ErrHostHeld: another PowerCycleRemediation holds the same host (its
// remediation is admitted and not released); this one waits.
var ErrHostHeld = errors.New("kube: host held by another remediation")

// ErrNoHost: the remediation's Node names no BareMetalHost (no Cluster API
// Machine owns it and its template's hostMapping finds none).
var ErrNoHost = errors.New("kube: no host for the node")

// controlPlaneNodeLabel marks a control-plane Node.
const controlPlaneNodeLabel = "node-role.kubernetes.io/control-plane"

// ExternalRemediations is a remediation.MachineStore over the
// PowerCycleRemediations of one namespace: each remediation object is one
// "machine" of the remediation package. NeedsRemediation is true until the
// health checker deletes the object (a deletion timestamp: our finalizer
// holds it) or NodeHealthCheck marks it timed out (TimedOutAnnotation):
// then the phased mode cancels (releases the host, restores the Node); or
// until the Node is back after the power cycle (NodeBackAnnotation, the
// package's RemoveNeedsRemediation).
// NodeName is the owning Machine's nodeRef (Cluster API), else the
// NodeNameAnnotation, else the object's name (NodeHealthCheck).
// HasControllerOwner is always false: an exhausted remediation fails and
// the health checker escalates; the store never deletes a Machine.
// The state is saved in the status (compare-and-swap on the
// resourceVersion). List also returns the Nodes no remediation names, as
// healthy members, so the storm guard's percentages count the cluster's
// Nodes; every member is in one scope (cluster "", health check "").
type ExternalRemediations struct {
	Client    client.Client
	Namespace string
	// Reader, if set, is what a remediation is read with by name (the
	// manager's API reader, as Machines.Reader); default Client.
	Reader client.Reader
}

var _ remediation.MachineStore = (*ExternalRemediations)(nil)

// machineOwner is the Cluster API Machine owning r, or "".
func machineOwner(r *v1alpha1.PowerCycleRemediation) string {
	for _, o := range r.OwnerReferences {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err == nil && gv.Group == clusterv1.GroupVersion.Group && o.Kind == "Machine" {
			return o.Name
		}
	}
	return ""
}

// nodeOf names the Node r remediates ("" if a Machine has none yet).
func (s *ExternalRemediations) nodeOf(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (name string, controlPlane bool, err error) {
	if m := machineOwner(r); m != "" {
		var machine clusterv1.Machine
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: m}, &machine)
		if apierrors.IsNotFound(err) {
			return r.Status.NodeName, false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("kube: remediation %s/%s: machine %s: %w", r.Namespace, r.Name, m, err)
		}
		n := machine.Status.NodeRef.Name
		if n == "" {
			n = r.Status.NodeName
		}
		return n, hasKey(machine.Labels, clusterv1.MachineControlPlaneLabel), nil
	}
	n := r.Name
	if a := r.Annotations[v1alpha1.NodeNameAnnotation]; a != "" {
		n = a
	}
	var node corev1.Node
	if err := s.Client.Get(ctx, types.NamespacedName{Name: n}, &node); err == nil {
		controlPlane = hasKey(node.Labels, controlPlaneNodeLabel)
	} else if !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("kube: remediation %s/%s: node %s: %w", r.Namespace, r.Name, n, err)
	}
	return n, controlPlane, nil
}

// NodeBackAnnotation marks a PowerCycleRemediation whose Node came back
// Ready after the power cycle (the remediation package's
// RemoveNeedsRemediation): it is over, whatever its checker does next.
const NodeBackAnnotation = "remediation.rebootkit.io/node-back"

// needsRemediation: not deleted, not timed out by NodeHealthCheck, its
// Node not back.
func needsRemediation(r *v1alpha1.PowerCycleRemediation) bool {
	return r.DeletionTimestamp == nil && !hasKey(r.Annotations, v1alpha1.TimedOutAnnotation) && !hasKey(r.Annotations, NodeBackAnnotation)
}

func (s *ExternalRemediations) record(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (remediation.MachineRecord, error) {
	node, cp, err := s.nodeOf(ctx, r)
	if err != nil {
		return remediation.MachineRecord{}, err
	}
	rec := remediation.MachineRecord{Version: r.ResourceVersion, Machine: remediation.Machine{
		Name: r.Name, UID: string(r.UID), NodeName: node, ControlPlane: cp,
		NeedsRemediation: needsRemediation(r),
	}}
	if raw := r.Status.State; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec.State); err != nil {
			return rec, fmt.Errorf("kube: remediation %s/%s: status.state: %w", r.Namespace, r.Name, err)
		}
	}
	return rec, nil
}

func (s *ExternalRemediations) get(ctx context.Context, name string) (*v1alpha1.PowerCycleRemediation, error) {
	var r v1alpha1.PowerCycleRemediation
	var rd client.Reader = s.Client
	if s.Reader != nil {
		rd = s.Reader
	}
	if err := rd.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &r); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, name, remediation.ErrNotFound)
		}
		return nil, fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, name, err)
	}
	return &r, nil
}

// Get implements remediation.MachineStore.
func (s *ExternalRemediations) Get(ctx context.Context, name string) (remediation.MachineRecord, error) {
	r, err := s.get(ctx, name)
	if err != nil {
		return remediation.MachineRecord{}, err
	}
	return s.record(ctx, r)
}

// List implements remediation.MachineStore: the remediations, then the
// Nodes none of them names (healthy members named "node/" + name).
func (s *ExternalRemediations) List(ctx context.Context) ([]remediation.MachineRecord, error) {
	var l v1alpha1.PowerCycleRemediationList
	if err := s.Client.List(ctx, &l, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list remediations: %w", err)
	}
	out := make([]remediation.MachineRecord, 0, len(l.Items))
	named := map[string]bool{}
	for i := range l.Items {
		rec, err := s.record(ctx, &l.Items[i])
		if err != nil {
			return nil, err
		}
		named[rec.Machine.NodeName] = true
		out = append(out, rec)
	}
	var nodes corev1.NodeList
	if err := s.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("kube: list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if !named[n.Name] {
			out = append(out, remediation.MachineRecord{Machine: remediation.Machine{Name: "node/" + n.Name, NodeName: n.Name,
				ControlPlane: hasKey(n.Labels, controlPlaneNodeLabel)}})
		}
	}
	return out, nil
}

// statusPatch is the status body for st (conditions are written apart).
func statusPatch(st remediation.State) (map[string]any, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	phase := ""
	if st.Phase != remediation.PhaseNone {
		phase = st.Phase.String()
	}
	var last any
	if !st.Started.IsZero() {
		last = metav1.NewTime(st.Started)
	}
	return map[string]any{"state": string(raw), "phase": phase, "retryCount": max(st.Attempt-1, 0),
		"lastRemediated": last, "message": st.Message}, nil
}

// SaveState implements remediation.MachineStore: status.state and the
// CAPM3-like fields, a compare-and-swap on version.
func (s *ExternalRemediations) SaveState(ctx context.Context, name, version string, st remediation.State) error {
	r, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if r.ResourceVersion != version {
		return fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, name, remediation.ErrConflict)
	}
	body, err := statusPatch(st)
	if err != nil {
		return err
	}
	if node, _, err := s.nodeOf(ctx, r); err == nil && node != "" {
		body["nodeName"] = node
	}
	return s.patchStatus(ctx, r, body)
}

func (s *ExternalRemediations) patchStatus(ctx context.Context, r *v1alpha1.PowerCycleRemediation, status map[string]any) error {
	err := s.Client.Status().Patch(ctx, r, casPatch(r.ResourceVersion, map[string]any{"status": status}))
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, r.Name, remediation.ErrConflict)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, r.Name, remediation.ErrNotFound)
	case err != nil:
		return fmt.Errorf("kube: remediation %s/%s: status: %w", s.Namespace, r.Name, err)
	}
	return nil
}

// RemoveNeedsRemediation implements remediation.MachineStore: it marks
// the remediation NodeBackAnnotation (the health checker deletes the
// object when it sees the Node healthy).
func (s *ExternalRemediations) RemoveNeedsRemediation(ctx context.Context, name string) error {
	r, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if hasKey(r.Annotations, NodeBackAnnotation) {
		return nil
	}
	err = s.Client.Patch(ctx, r, casPatch(r.ResourceVersion, metadataPatch(nil, map[string]any{NodeBackAnnotation: "true"})))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, name, remediation.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("kube: remediation %s/%s: %w", s.Namespace, name, err)
	}
	return nil
}

// Delete implements remediation.MachineStore: never asked
// (HasControllerOwner is false); it deletes nothing.
func (s *ExternalRemediations) Delete(context.Context, string) error { return nil }

// HostOf returns the BareMetalHost recorded in the remediation's status
// (recorded once found: the Node that names it may be deleted mid-way).
func (s *ExternalRemediations) HostOf(ctx context.Context, name string) (string, error) {
	r, err := s.get(ctx, name)
	if err != nil {
		return "", err
	}
	return r.Status.Host, nil
}

// NodeRestrictionDomain is the label domain the NodeRestriction
// admission plugin forbids kubelets to set on their Node: a Node label
// names a host only under it (or a subdomain of it).
const NodeRestrictionDomain = "node-restriction.kubernetes.io"

// kubeletCannotWrite reports whether a kubelet under NodeRestriction
// cannot set the Node label key.
func kubeletCannotWrite(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	return ok && (domain == NodeRestrictionDomain || strings.HasSuffix(domain, "."+NodeRestrictionDomain))
}

// FindHost finds the host of r: through its owning Machine's
// Metal3Machine (Cluster API), else the template's hostMapping (hosts,
// then the BareMetalHost whose hostAnnotation names the Node, then the
// Node's label if its kubelet cannot write it). "" with ErrNoHost if none
// names one, if the label's key is one its kubelet can write, or if the
// two sides disagree.
func (s *ExternalRemediations) FindHost(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (string, error) {
	if m := machineOwner(r); m != "" {
		h, err := HostOfMachine(ctx, s.Client, r.Namespace, m)
		if err == nil && h == "" {
			err = fmt.Errorf("%w: machine %s has no BareMetalHost consuming its infrastructure", ErrNoHost, m)
		}
		return h, err
	}
	node, _, err := s.nodeOf(ctx, r)
	if err != nil {
		return "", err
	}
	hm := r.Spec.HostMapping
	if hm == nil {
		return "", fmt.Errorf("%w: node %s (no Cluster API Machine; set hostMapping in the template)", ErrNoHost, node)
	}
	if h := hm.Hosts[node]; h != "" {
		return h, nil
	}
	byHost, err := s.hostNaming(ctx, r.Namespace, hm.HostAnnotation, node)
	if err != nil {
		return "", err
	}
	byLabel := ""
	if hm.Label != "" && kubeletCannotWrite(hm.Label) {
		var n corev1.Node
		err := s.Client.Get(ctx, types.NamespacedName{Name: node}, &n)
		switch {
		case err == nil:
			byLabel = n.Labels[hm.Label]
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("kube: node %s: %w", node, err)
		}
	}
	switch {
	case byHost != "" && byLabel != "" && byHost != byLabel:
		return "", fmt.Errorf("%w: node %s: BareMetalHost %s names it (annotation %q) but its label %q names host %s; fix the hostMapping",
			ErrNoHost, node, byHost, hm.HostAnnotation, hm.Label, byLabel)
	case byHost != "":
		return byHost, nil
	case byLabel != "":
		return byLabel, nil
	case hm.Label != "" && !kubeletCannotWrite(hm.Label):
		return "", fmt.Errorf("%w: node %s: hostMapping.label %q is not in the %s domain, so the Node's kubelet can write it and name any host; "+
			"use a %s/ label, hostMapping.hostAnnotation on the BareMetalHosts, or hostMapping.hosts",
			ErrNoHost, node, hm.Label, NodeRestrictionDomain, NodeRestrictionDomain)
	}
	return "", fmt.Errorf("%w: node %s: no BareMetalHost has annotation %q naming it and it has no label %q; fix the hostMapping",
		ErrNoHost, node, hm.HostAnnotation, hm.Label)
}

// hostNaming is the one BareMetalHost of namespace whose annotation key
// names node ("" if none or key is ""; ErrNoHost if two do).
func (s *ExternalRemediations) hostNaming(ctx context.Context, namespace, key, node string) (string, error) {
	if key == "" {
		return "", nil
	}
	var hosts metal3.BareMetalHostList
	if err := s.Client.List(ctx, &hosts, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("kube: list hosts: %w", err)
	}
	found := ""
	for _, h := range hosts.Items {
		if v, ok := h.Annotations[key]; !ok || v != node {
			continue
		}
		if found != "" {
			return "", fmt.Errorf("%w: node %s: BareMetalHosts %s and %s both name it (annotation %q); fix one", ErrNoHost, node, found, h.Name, key)
		}
		found = h.Name
	}
	return found, nil
}
