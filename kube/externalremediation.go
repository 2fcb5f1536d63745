package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// NodeNameAnnotation, else the object's name (NodeHealthCheck), as read
// when the host was found and recorded then (status.nodeName, with
// status.controlPlane for ControlPlane, and status.source: the owning
// Machine by name and UID, or the Node named); a checker that names
// another Node or another source later cancels the remediation
// (NeedsRemediation false), and a Machine's Node that registers later is
// read from the recorded Machine only.
// HasControllerOwner is always false: an exhausted remediation fails and
// the health checker escalates; the store never deletes a Machine.
// The state is saved in the status (compare-and-swap on the
// resourceVersion). List leaves out the remediations of Nodes that are
// gone (unless in flight or still needing remediation) and returns the Nodes no remediation names, as
// healthy members, so the storm guard's percentages count the cluster's
// Nodes; every member is in one scope (cluster "", health check "").
type ExternalRemediations struct {
	Client    client.Client
	Namespace string
	// Reader, if set, is what a remediation is read with by name (the
	// manager's API reader, as Machines.Reader); default Client.
	Reader client.Reader
	// HostAnnotations are BareMetalHost annotation keys, besides
	// DefaultHostAnnotation and the spec's hostMapping.hostAnnotation,
	// that a hostMapping is cross-checked under (FindHost).
	HostAnnotations []string
	// HostLabels are Node label keys, besides DefaultHostLabel and the
	// spec's hostMapping.label, that a hostMapping is cross-checked under
	// (those the Node's kubelet can write are ignored).
	HostLabels []string
	// Hosts maps a Node to its BareMetalHost, as the controller's owner
	// configured it (not the remediation's spec, which the checker role
	// writes): trusted as hostMapping.hosts is not, and still
	// cross-checked under every known key. A hostMapping.hosts entry is
	// used only if this map, a BareMetalHost annotation or a Node label
	// under a known key confirms it.
	Hosts map[string]string
}

var _ remediation.MachineStore = (*ExternalRemediations)(nil)

// machineOwnerRef is the owner reference to the Cluster API Machine
// owning r (zero if none).
func machineOwnerRef(r *v1alpha1.PowerCycleRemediation) metav1.OwnerReference {
	for _, o := range r.OwnerReferences {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err == nil && gv.Group == clusterv1.GroupVersion.Group && o.Kind == "Machine" {
			return o
		}
	}
	return metav1.OwnerReference{}
}

// sourceNow is where r's checker says its Node comes from now: the
// owning Machine (name and UID), else the Node it names (the
// NodeNameAnnotation, else r's name).
func sourceNow(r *v1alpha1.PowerCycleRemediation) v1alpha1.HostSource {
	if o := machineOwnerRef(r); o.Name != "" {
		return v1alpha1.HostSource{Machine: o.Name, MachineUID: o.UID}
	}
	return v1alpha1.HostSource{Node: cmp.Or(r.Annotations[v1alpha1.NodeNameAnnotation], r.Name)}
}

// describeSource names src in an operator message.
func describeSource(src v1alpha1.HostSource) string {
	if src.Machine != "" {
		return fmt.Sprintf("Machine %s (uid %s)", src.Machine, src.MachineUID)
	}
	return "Node " + src.Node
}

// nodeNow names the Node r's checker names now ("" if a Machine has none
// yet: the owning Machine's nodeRef, else the NodeNameAnnotation, else
// r's name) and whether it is a control-plane one now (the Machine's
// label, else the Node's); found is false when that Machine or Node does
// not exist (its control-plane role unknown).
func (s *ExternalRemediations) nodeNow(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (name string, controlPlane, found bool, err error) {
	if o := machineOwnerRef(r); o.Name != "" {
		m := o.Name
		var machine clusterv1.Machine
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: m}, &machine)
		if apierrors.IsNotFound(err) || (err == nil && o.UID != "" && machine.UID != o.UID) {
			// Gone, or another Machine of that name: its nodeRef is
			// not this remediation's Node.
			return r.Status.NodeName, false, false, nil
		}
		if err != nil {
			return "", false, false, fmt.Errorf("kube: remediation %s/%s: machine %s: %w", r.Namespace, r.Name, m, err)
		}
		n := machine.Status.NodeRef.Name
		if n == "" {
			n = r.Status.NodeName
		}
		return n, hasKey(machine.Labels, clusterv1.MachineControlPlaneLabel), true, nil
	}
	n := r.Name
	if a := r.Annotations[v1alpha1.NodeNameAnnotation]; a != "" {
		n = a
	}
	cp, found, err := s.nodeRole(ctx, n)
	if err != nil {
		return "", false, false, fmt.Errorf("kube: remediation %s/%s: %w", r.Namespace, r.Name, err)
	}
	return n, cp, found, nil
}

// nodeRole reads whether Node n is a control-plane one (found false if
// there is no such Node).
func (s *ExternalRemediations) nodeRole(ctx context.Context, n string) (controlPlane, found bool, err error) {
	var node corev1.Node
	err = s.Client.Get(ctx, types.NamespacedName{Name: n}, &node)
	switch {
	case apierrors.IsNotFound(err):
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("node %s: %w", n, err)
	}
	return hasKey(node.Labels, controlPlaneNodeLabel), true, nil
}

// nodeView is the Node a remediation acts on, as nodeOf reads it.
type nodeView struct {
	// Name is the Node remediated: status.nodeName once the host is
	// found (frozen with status.host), else the one its checker names now.
	Name string
	// ControlPlane: the Node (or Machine) is a control-plane one, as
	// recorded with the host (status.controlPlane), else as read now.
	ControlPlane bool
	// Renamed is the other Node (or Machine) the checker names now,
	// after the host was found for Name ("" if none): the remediation is
	// cancelled.
	Renamed string
}

// nodeOf is the Node r remediates. Once its host is found, the Node and
// its control-plane role are the ones recorded with it in the status
// (status.nodeName, status.controlPlane), never what the checker's
// annotation or the Machine name later, nor the live Node's label (the
// Node is deleted mid-way). Before that, and for a remediation recorded
// by an earlier version without status.controlPlane, the role is read
// from the Machine's or the Node's label, and counts as control plane if
// that Machine or Node does not exist (so a host found while its Node is
// gone records control plane).
func (s *ExternalRemediations) nodeOf(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (nodeView, error) {
	now, cp, found, err := s.nodeNow(ctx, r)
	if err != nil {
		return nodeView{}, err
	}
	if r.Status.Host == "" {
		// A Machine or Node that does not exist has an unknown role:
		// control plane, the cautious side (as for a recorded one below).
		return nodeView{Name: now, ControlPlane: cp || !found}, nil
	}
	v := nodeView{Name: r.Status.NodeName}
	src := sourceNow(r)
	switch rec := r.Status.Source; {
	case rec != (v1alpha1.HostSource{}) && rec != src:
		// Another owner, or an annotation instead of an owner (or the
		// reverse): whatever Node it names, it is not this one's.
		v.Renamed = describeSource(src)
		if now != "" && src.Machine != "" {
			v.Renamed += " (Node " + now + ")"
		}
	case v.Name == "" && rec != (v1alpha1.HostSource{}):
		// The recorded Machine's Node that registered after its host was
		// found (nodeNow read it by the recorded name and UID).
		v.Name = now
	case now != "" && v.Name != now:
		// A remediation recorded without its source by an earlier
		// version keeps the Node recorded then (none if none).
		v.Renamed = "Node " + now
	}
	switch {
	case r.Status.ControlPlane != nil:
		v.ControlPlane = *r.Status.ControlPlane
	case v.Renamed != "" && v.Name == "":
		v.ControlPlane = true // unknown: the cautious side
	case v.Renamed != "":
		if cp, found, err = s.nodeRole(ctx, v.Name); err != nil {
			return nodeView{}, fmt.Errorf("kube: remediation %s/%s: %w", r.Namespace, r.Name, err)
		}
		v.ControlPlane = cp || !found
	default:
		v.ControlPlane = cp || !found
	}
	return v, nil
}

// renamedMessage says why a remediation whose checker names another Node
// than the one its host was found for is cancelled.
func renamedMessage(r *v1alpha1.PowerCycleRemediation, v nodeView) string {
	return fmt.Sprintf("cancelled: this remediation power-cycles host %s for %s, but its checker now names %s "+
		"(annotation %s or owning Machine changed); rebootkit does not act on %s: delete this remediation and create one for it",
		r.Status.Host, describeSource(recordedSource(r, v)), v.Renamed, v1alpha1.NodeNameAnnotation, v.Renamed)
}

// recordedSource is where r's host was found for, as recorded (the
// recorded Node, for a remediation an earlier version recorded).
func recordedSource(r *v1alpha1.PowerCycleRemediation, v nodeView) v1alpha1.HostSource {
	if r.Status.Source != (v1alpha1.HostSource{}) {
		return r.Status.Source
	}
	return v1alpha1.HostSource{Node: v.Name}
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
	v, err := s.nodeOf(ctx, r)
	if err != nil {
		return remediation.MachineRecord{}, err
	}
	rec := remediation.MachineRecord{Version: r.ResourceVersion, Machine: remediation.Machine{
		Name: r.Name, UID: string(r.UID), NodeName: v.Name, ControlPlane: v.ControlPlane,
		NeedsRemediation: needsRemediation(r) && v.Renamed == "",
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

// List implements remediation.MachineStore: the remediations whose Node
// exists, that are power-cycling (in flight: rebootkit may have deleted
// the Node) or that still need remediation (a Node that is gone is
// unhealthy, as Cluster API's NodeNotFound), then the Nodes none of them
// names (healthy members named "node/" + name). A remediation of a Node
// that is gone, not in flight and no longer needing remediation (deleted,
// timed out, Node back) is no member: the storm guard's total is the
// cluster's Nodes, not grown by remediations its checker left behind (an
// admission kept while its host is held still counts, from the admission
// record).
func (s *ExternalRemediations) List(ctx context.Context) ([]remediation.MachineRecord, error) {
	var l v1alpha1.PowerCycleRemediationList
	if err := s.Client.List(ctx, &l, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("kube: list remediations: %w", err)
	}
	var nodes corev1.NodeList
	if err := s.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("kube: list nodes: %w", err)
	}
	exists := make(map[string]bool, len(nodes.Items))
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	out := make([]remediation.MachineRecord, 0, len(l.Items))
	named := map[string]bool{}
	for i := range l.Items {
		rec, err := s.record(ctx, &l.Items[i])
		if err != nil {
			return nil, err
		}
		if n := rec.Machine.NodeName; n != "" && !exists[n] && !remediation.InFlight(rec.State.Phase) && !rec.Machine.NeedsRemediation {
			// Not a member: its Node is not in the cluster, it is not
			// power-cycling, and it no longer needs remediation (deleted,
			// timed out, its Node back, or renamed: one whose admission
			// is kept while its host is held is counted from the
			// admission record). One that still needs remediation stays
			// an unhealthy member: a Node that is gone is unhealthy to
			// the checkers (Cluster API's NodeNotFound), and its host is
			// the one to power-cycle.
			continue
		}
		named[rec.Machine.NodeName] = true
		out = append(out, rec)
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
	if r.Status.Host != "" && (r.Status.NodeName == "" || r.Status.ControlPlane == nil) {
		// Recorded once: a Machine's Node that registered after its host
		// was found, or the role of a remediation an earlier version
		// recorded without it. Never overwritten (nodeOf).
		v, err := s.nodeOf(ctx, r)
		if err != nil {
			return err
		}
		if r.Status.NodeName == "" && v.Name != "" {
			body["nodeName"] = v.Name
		}
		if r.Status.ControlPlane == nil {
			body["controlPlane"] = v.ControlPlane
		}
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
// names one, if the label's key is one its kubelet can write, or if two
// sides disagree: the BareMetalHost side and the label naming different
// hosts; or, under any known key (DefaultHostAnnotation,
// DefaultHostLabel, the configured HostAnnotations and HostLabels, and
// the spec's, which only add keys), the host found has an annotation
// naming another Node, another BareMetalHost's annotation names this
// Node, or the Node's label names another host.
func (s *ExternalRemediations) FindHost(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (string, error) {
	h, _, err := s.findHost(ctx, r)
	return h, err
}

// findHost is FindHost, returning too the Node it found the host for, as
// nodeOf read it in the same pass (recorded with the host).
func (s *ExternalRemediations) findHost(ctx context.Context, r *v1alpha1.PowerCycleRemediation) (string, nodeView, error) {
	v, err := s.nodeOf(ctx, r)
	if err != nil {
		return "", v, err
	}
	if o := machineOwnerRef(r); o.Name != "" {
		// The owner's UID too: a Machine re-created under the same
		// name before the host was found is another Machine, and its
		// host another host (nodeNow's rule).
		h, err := hostOfMachine(ctx, s.Client, r.Namespace, o.Name, o.UID)
		if err == nil && h == "" {
			err = fmt.Errorf("%w: machine %s has no BareMetalHost consuming its infrastructure", ErrNoHost, o.Name)
		}
		return h, v, err
	}
	h, err := s.mappedHost(ctx, r, v.Name)
	return h, v, err
}

// DefaultHostAnnotation is the BareMetalHost annotation naming the Node
// the host runs that every hostMapping is cross-checked against, whatever
// key the remediation's spec names.
const DefaultHostAnnotation = "rebootkit.io/node"

// DefaultHostLabel is the Node label naming its BareMetalHost that every
// hostMapping is cross-checked against (in NodeRestrictionDomain, which
// the Node's kubelet cannot write).
const DefaultHostLabel = NodeRestrictionDomain + "/baremetalhost"

// annotationKeys are the BareMetalHost annotation keys a mapping is
// cross-checked under: DefaultHostAnnotation, the configured ones and the
// spec's, sorted, without duplicates. The spec's keys only add checks:
// the spec is written by the checker role, so none it leaves out is
// skipped.
func (s *ExternalRemediations) annotationKeys(hm *v1alpha1.HostMapping) []string {
	keys := append([]string{DefaultHostAnnotation, hm.HostAnnotation}, s.HostAnnotations...)
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "" })
	slices.Sort(keys)
	return slices.Compact(keys)
}

// labelKeys are the Node label keys a mapping is cross-checked under:
// DefaultHostLabel, the configured ones and the spec's, those the Node's
// kubelet cannot write, sorted, without duplicates.
func (s *ExternalRemediations) labelKeys(hm *v1alpha1.HostMapping) []string {
	keys := append([]string{DefaultHostLabel, hm.Label}, s.HostLabels...)
	keys = slices.DeleteFunc(keys, func(k string) bool { return !kubeletCannotWrite(k) })
	slices.Sort(keys)
	return slices.Compact(keys)
}

// mappedHost is the host the template's hostMapping names for node.
func (s *ExternalRemediations) mappedHost(ctx context.Context, r *v1alpha1.PowerCycleRemediation, node string) (string, error) {
	hm := r.Spec.HostMapping
	trusted := s.Hosts[node]
	if hm == nil && trusted == "" {
		return "", fmt.Errorf("%w: node %s (no Cluster API Machine; set hostMapping in the template, or list it in the controller's --hosts)", ErrNoHost, node)
	}
	if hm == nil {
		hm = &v1alpha1.HostMapping{}
	}
	hostKeys := s.annotationKeys(hm)
	annotated, err := s.hostAnnotations(ctx, r.Namespace, hostKeys)
	if err != nil {
		return "", err
	}
	var byHost string
	if hm.HostAnnotation != "" {
		if byHost, err = hostNaming(annotated[hm.HostAnnotation], hm.HostAnnotation, node); err != nil {
			return "", err
		}
	}
	var labels map[string]string
	var n corev1.Node
	switch err := s.Client.Get(ctx, types.NamespacedName{Name: node}, &n); {
	case err == nil:
		labels = n.Labels
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("kube: node %s: %w", node, err)
	}
	byLabel := ""
	if hm.Label != "" && kubeletCannotWrite(hm.Label) {
		byLabel = labels[hm.Label]
	}
	h := hm.Hosts[node]
	labelKeys := s.labelKeys(hm)
	switch {
	case trusted != "" && h != "" && h != trusted:
		return "", fmt.Errorf("%w: node %s: hostMapping.hosts maps it to BareMetalHost %s but the controller's hosts map to %s; fix the template or the controller's --hosts",
			ErrNoHost, node, h, trusted)
	case trusted != "":
		// The controller owner's map: checked below against what the
		// hosts and the Node say under every known key.
		h = trusted
	case h != "":
		// The spec's map is written by the checker role: used only where
		// a source it cannot write confirms it, and checked below.
		if !confirmed(node, h, annotated, hostKeys, labels, labelKeys) {
			return "", fmt.Errorf("%w: node %s: hostMapping.hosts maps it to BareMetalHost %s, which nothing the health checker cannot write confirms "+
				"(the remediation's spec is the checker's); annotate BareMetalHost %s with %s=%s, label Node %s with %s=%s, "+
				"or list %s=%s in the controller's --hosts",
				ErrNoHost, node, h, h, DefaultHostAnnotation, node, node, DefaultHostLabel, h, node, h)
		}
	case byHost != "" && byLabel != "" && byHost != byLabel:
		return "", fmt.Errorf("%w: node %s: BareMetalHost %s names it (annotation %q) but its label %q names host %s; fix the hostMapping",
			ErrNoHost, node, byHost, hm.HostAnnotation, hm.Label, byLabel)
	case byHost != "":
		h = byHost
	case byLabel != "":
		h = byLabel
	case hm.Label != "" && !kubeletCannotWrite(hm.Label):
		return "", fmt.Errorf("%w: node %s: hostMapping.label %q is not in the %s domain, so the Node's kubelet can write it and name any host; "+
			"use a %s/ label, hostMapping.hostAnnotation on the BareMetalHosts, or hostMapping.hosts",
			ErrNoHost, node, hm.Label, NodeRestrictionDomain, NodeRestrictionDomain)
	default:
		return "", fmt.Errorf("%w: node %s: no BareMetalHost has annotation %q naming it and it has no label %q; fix the hostMapping",
			ErrNoHost, node, hm.HostAnnotation, hm.Label)
	}
	if err := crossCheck(node, h, annotated, hostKeys, labels, labelKeys); err != nil {
		return "", err
	}
	return h, nil
}

// confirmed reports whether, under a known key, host h's annotation
// names node or the Node's label names h.
func confirmed(node, h string, annotated map[string]map[string]string, hostKeys []string, labels map[string]string, labelKeys []string) bool {
	for _, k := range hostKeys {
		if v, ok := annotated[k][h]; ok && v == node {
			return true
		}
	}
	for _, k := range labelKeys {
		if labels[k] == h {
			return true
		}
	}
	return false
}

// crossCheck refuses host h for node if, under any known key, host h's
// annotation names another Node, another BareMetalHost's names node, or
// the Node's label names another host (annotated: key, then host, then
// the annotation's value).
func crossCheck(node, h string, annotated map[string]map[string]string, hostKeys []string, labels map[string]string, labelKeys []string) error {
	for _, k := range hostKeys {
		if other, ok := annotated[k][h]; ok && other != node {
			return fmt.Errorf("%w: node %s: hostMapping maps it to BareMetalHost %s, whose annotation %q names Node %s; fix the hostMapping or the annotation",
				ErrNoHost, node, h, k, other)
		}
		for _, b := range slices.Sorted(maps.Keys(annotated[k])) {
			if b != h && annotated[k][b] == node {
				return fmt.Errorf("%w: node %s: hostMapping maps it to BareMetalHost %s, but BareMetalHost %s names it (annotation %q); fix the hostMapping or the annotation",
					ErrNoHost, node, h, b, k)
			}
		}
	}
	for _, k := range labelKeys {
		if v := labels[k]; v != "" && v != h {
			return fmt.Errorf("%w: node %s: hostMapping maps it to BareMetalHost %s, but its label %q names host %s; fix the hostMapping or the label",
				ErrNoHost, node, h, k, v)
		}
	}
	return nil
}

// hostAnnotations maps each key to the BareMetalHosts of namespace that
// have that annotation, and each to its value.
func (s *ExternalRemediations) hostAnnotations(ctx context.Context, namespace string, keys []string) (map[string]map[string]string, error) {
	var hosts metal3.BareMetalHostList
	if err := s.Client.List(ctx, &hosts, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("kube: list hosts: %w", err)
	}
	out := make(map[string]map[string]string, len(keys))
	for _, k := range keys {
		out[k] = map[string]string{}
		for _, h := range hosts.Items {
			if v, ok := h.Annotations[k]; ok {
				out[k][h.Name] = v
			}
		}
	}
	return out, nil
}

// hostNaming is the one host of annotated (host: value of key) naming
// node ("" if none; ErrNoHost if two do).
func hostNaming(annotated map[string]string, key, node string) (string, error) {
	found := ""
	for _, h := range slices.Sorted(maps.Keys(annotated)) {
		if annotated[h] != node {
			continue
		}
		if found != "" {
			return "", fmt.Errorf("%w: node %s: BareMetalHosts %s and %s both name it (annotation %q); fix one", ErrNoHost, node, found, h, key)
		}
		found = h
	}
	return found, nil
}
