package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/remediation"
)

// Nodes is a remediation.NodeStore over core Nodes. Every change is an
// update with the resourceVersion read, retried on a conflict from a
// fresh read (the changes are idempotent: add what is missing, delete,
// set or clear one taint), so a concurrent writer's change is never lost.
type Nodes struct {
	Client client.Client
	// Retries bounds the conflicts retried (default 10).
	Retries int
}

var _ remediation.NodeStore = (*Nodes)(nil)

// Get implements remediation.NodeStore: a missing Node is Exists false.
func (s *Nodes) Get(ctx context.Context, name string) (remediation.Node, error) {
	var n corev1.Node
	err := s.Client.Get(ctx, types.NamespacedName{Name: name}, &n)
	if apierrors.IsNotFound(err) {
		return remediation.Node{Name: name}, nil
	}
	if err != nil {
		return remediation.Node{}, fmt.Errorf("kube: get node %s: %w", name, err)
	}
	out := remediation.Node{Exists: true, Name: name, UID: string(n.UID), Labels: n.Labels, Annotations: n.Annotations}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == remediation.OutOfServiceTaint && t.Effect == corev1.TaintEffectNoExecute {
			out.OutOfService = true
		}
	}
	return out, nil
}

// Delete implements remediation.NodeStore: the Node is deleted with its UID
// as a precondition (the API server refuses to delete a Node registered
// again under the same name: remediation.ErrConflict); deleting a missing
// Node succeeds.
func (s *Nodes) Delete(ctx context.Context, name, uid string) error {
	var opts []client.DeleteOption
	if uid != "" {
		u := types.UID(uid)
		opts = append(opts, client.Preconditions{UID: &u})
	}
	err := s.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, opts...)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: node %s was registered again since it was read: %w", name, remediation.ErrConflict)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete node %s: %w", name, err)
	}
	return nil
}

// change patches Node name with the body f returns for the Node read (nil:
// nothing to write), with the resourceVersion read, retrying conflicts.
func (s *Nodes) change(ctx context.Context, name string, f func(*corev1.Node) map[string]any) error {
	retries := s.Retries
	if retries <= 0 {
		retries = 10
	}
	var err error
	for i := 0; i < retries; i++ {
		var n corev1.Node
		if err = s.Client.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
			return fmt.Errorf("kube: node %s: %w", name, err)
		}
		body := f(&n)
		if body == nil {
			return nil
		}
		if err = s.Client.Patch(ctx, &n, casPatch(n.ResourceVersion, body)); err == nil || !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("kube: update node %s: %w", name, err)
	}
	return nil
}

// SetOutOfService implements remediation.NodeStore.
func (s *Nodes) SetOutOfService(ctx context.Context, name string, on bool) error {
	return s.change(ctx, name, func(n *corev1.Node) map[string]any {
		has := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == remediation.OutOfServiceTaint && t.Effect == corev1.TaintEffectNoExecute
		})
		var taints []corev1.Taint
		switch {
		case on && has < 0:
			taints = append(slices.Clone(n.Spec.Taints), corev1.Taint{Key: remediation.OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
		case !on && has >= 0:
			taints = slices.Delete(slices.Clone(n.Spec.Taints), has, has+1)
		default:
			return nil
		}
		// The list is replaced whole (a merge patch cannot add to a list);
		// the resourceVersion makes that safe against a concurrent change.
		return map[string]any{"spec": map[string]any{"taints": taints}}
	})
}

// AddMetadata implements remediation.NodeStore: labels and annotations the
// Node lacks are added; existing ones are left as they are.
func (s *Nodes) AddMetadata(ctx context.Context, name string, labels, annotations map[string]string) error {
	return s.change(ctx, name, func(n *corev1.Node) map[string]any {
		add := func(have, from map[string]string) map[string]any {
			var out map[string]any
			for k, v := range from {
				if _, ok := have[k]; !ok {
					if out == nil {
						out = map[string]any{}
					}
					out[k] = v
				}
			}
			return out
		}
		l, a := add(n.Labels, labels), add(n.Annotations, annotations)
		if l == nil && a == nil {
			return nil
		}
		return metadataPatch(l, a)
	})
}

// Admissions is a remediation.AdmissionStore over one ConfigMap, shared
// by the Machine-annotation remediation (RemediationController) and the
// external remediation (ExternalRemediationController), each in its own
// section (Section): a section's admitted names as JSON under its key
// "machines" ("external-machines"), the reboot request each recorded
// (remediation.Admissions.Requests: value, T, host) as a JSON object under
// "requests" ("external-requests") and each admitted name's
// remediation.Member under "members" ("external-members"; a ConfigMap
// without them, written by an earlier version, reads as none), the
// ConfigMap's resourceVersion as the record's version (compare-and-swap
// by the API server). The other section is read as
// remediation.Admissions.Others (each with the host its recorded request
// names, and its member's control-plane role in OthersControlPlane: one
// without a member counts as control plane) and never written: a write of one section is a compare-and-swap
// on the version that both were read at, so one record holds the storm
// guard's count, and the lock per host (hostAdmissions), of both
// controllers, and neither overwrites the other's members. The shared
// record's reads (Name "") count too, in Others, the admissions an
// earlier version kept in ExternalAdmissionsName not yet moved into it
// (withLegacy).
type Admissions struct {
	Client    client.Client
	Namespace string
	// Name of the ConfigMap (default "rebootkit-remediation-admissions",
	// the record both controllers share).
	Name string
	// Section is the section this store reads and writes: "" the
	// Machine-annotation remediation's, SectionExternal the
	// PowerCycleRemediations'.
	Section string
}

// SectionExternal is the Admissions section of the PowerCycleRemediations.
const SectionExternal = "external"

var _ remediation.AdmissionStore = (*Admissions)(nil)

func (s *Admissions) name() string {
	if s.Name == "" {
		return "rebootkit-remediation-admissions"
	}
	return s.Name
}

// admissionKeys are the ConfigMap keys of the section sec: its names, its
// requests, its members.
func admissionKeys(sec string) (names, requests, members string) {
	if sec == "" {
		return "machines", "requests", "members"
	}
	return sec + "-machines", sec + "-requests", sec + "-members"
}

// otherSection is the section that is not sec.
func otherSection(sec string) string {
	if sec == SectionExternal {
		return ""
	}
	return SectionExternal
}

// readSection parses the section sec of data.
func (s *Admissions) readSection(data map[string]string, sec string) ([]string, map[string]remediation.Request, error) {
	nk, rk, _ := admissionKeys(sec)
	var names []string
	if raw := data[nk]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &names); err != nil {
			return nil, nil, fmt.Errorf("kube: admissions %s/%s: %s: %w", s.Namespace, s.name(), nk, err)
		}
	}
	var reqs map[string]remediation.Request
	if raw := data[rk]; raw != "" {
		var rs map[string]admittedRequest
		if err := json.Unmarshal([]byte(raw), &rs); err != nil {
			return nil, nil, fmt.Errorf("kube: admissions %s/%s: %s: %w", s.Namespace, s.name(), rk, err)
		}
		for m, r := range rs {
			if reqs == nil {
				reqs = map[string]remediation.Request{}
			}
			reqs[m] = remediation.Request{Value: r.Value, At: r.At, Host: r.Host}
		}
	}
	return names, reqs, nil
}

// readMembers parses the members of the section sec of data.
func (s *Admissions) readMembers(data map[string]string, sec string) (map[string]remediation.Member, error) {
	_, _, mk := admissionKeys(sec)
	raw := data[mk]
	if raw == "" {
		return nil, nil
	}
	var ms map[string]admittedMember
	if err := json.Unmarshal([]byte(raw), &ms); err != nil {
		return nil, fmt.Errorf("kube: admissions %s/%s: %s: %w", s.Namespace, s.name(), mk, err)
	}
	var out map[string]remediation.Member
	for m, e := range ms {
		if out == nil {
			out = map[string]remediation.Member{}
		}
		out[m] = remediation.Member(e)
	}
	return out, nil
}

// GetAdmissions implements remediation.AdmissionStore; a missing ConfigMap
// is an empty record with version "" (PutAdmissions then creates it).
func (s *Admissions) GetAdmissions(ctx context.Context) (remediation.Admissions, error) {
	a, _, err := s.getAdmissions(ctx, "")
	return a, err
}

// getAdmissions is GetAdmissions, returning too the raw value of the
// ConfigMap's key extra (if not ""), of the same version.
func (s *Admissions) getAdmissions(ctx context.Context, extra string) (remediation.Admissions, string, error) {
	a, cm, err := s.read(ctx)
	if err != nil || cm == nil || extra == "" {
		return a, "", err
	}
	return a, cm.Data[extra], nil
}

func (s *Admissions) read(ctx context.Context) (remediation.Admissions, *corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.name()}, &cm)
	if apierrors.IsNotFound(err) {
		var a remediation.Admissions
		if err := s.withLegacy(ctx, &a, nil); err != nil {
			return remediation.Admissions{}, nil, err
		}
		return a, nil, nil
	}
	if err != nil {
		return remediation.Admissions{}, nil, fmt.Errorf("kube: admissions: %w", err)
	}
	a, err := s.parse(&cm)
	if err != nil {
		return a, &cm, err
	}
	if err := s.withLegacy(ctx, &a, &cm); err != nil {
		return remediation.Admissions{}, nil, err
	}
	return a, &cm, nil
}

// parse reads this store's record from cm.
func (s *Admissions) parse(cm *corev1.ConfigMap) (remediation.Admissions, error) {
	var err error
	var a remediation.Admissions
	if a.Machines, a.Requests, err = s.readSection(cm.Data, s.Section); err != nil {
		return remediation.Admissions{}, err
	}
	others, oreqs, err := s.readSection(cm.Data, otherSection(s.Section))
	if err != nil {
		return remediation.Admissions{}, err
	}
	omembers, err := s.readMembers(cm.Data, otherSection(s.Section))
	if err != nil {
		return remediation.Admissions{}, err
	}
	for _, o := range others {
		if a.Others == nil {
			a.Others = map[string]string{}
		}
		a.Others[o] = oreqs[o].Host
		if m, ok := omembers[o]; ok {
			// Without a member (an earlier version's record) the role is
			// unknown: the storm guard counts it as control plane.
			if a.OthersControlPlane == nil {
				a.OthersControlPlane = map[string]bool{}
			}
			a.OthersControlPlane[o] = m.ControlPlane
		}
	}
	if a.Members, err = s.readMembers(cm.Data, s.Section); err != nil {
		return remediation.Admissions{}, err
	}
	a.Version = cm.ResourceVersion
	return a, nil
}

// admittedMember is one entry of a section's members in the admission
// ConfigMap ("members", "external-members": remediation.Member).
type admittedMember struct {
	Cluster      string `json:"cluster,omitempty"`
	HealthCheck  string `json:"healthCheck,omitempty"`
	ControlPlane bool   `json:"controlPlane,omitempty"`
	Wrote        bool   `json:"wrote,omitempty"`
	PrevHost     string `json:"prevHost,omitempty"`
	// PrevHostSince, PrevHostSeen and EarlierHosts: remediation.Member's.
	PrevHostSince time.Time               `json:"prevHostSince,omitzero"`
	PrevHostSeen  time.Time               `json:"prevHostSeen,omitzero"`
	EarlierHosts  []remediation.MovedFrom `json:"earlierHosts,omitempty"`
}

// admittedRequest is one entry of a section's requests in the admission
// ConfigMap ("requests", "external-requests").
type admittedRequest struct {
	Value string    `json:"value"`
	At    time.Time `json:"at"`
	Host  string    `json:"host"`
}

// PutAdmissions implements remediation.AdmissionStore: this section's
// names, requests and members only (a.Others is the other section as read
// at a.Version, which the compare-and-swap keeps).
func (s *Admissions) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	return s.putAdmissions(ctx, a, nil)
}

// putAdmissions is PutAdmissions writing the keys of extra too, in the
// same compare-and-swap.
func (s *Admissions) putAdmissions(ctx context.Context, a remediation.Admissions, extra map[string]string) error {
	ms := slices.Clone(a.Machines)
	sort.Strings(ms)
	raw, err := json.Marshal(ms)
	if err != nil {
		return err
	}
	rs := make(map[string]admittedRequest, len(a.Requests))
	for m, r := range a.Requests {
		rs[m] = admittedRequest{Value: r.Value, At: r.At, Host: r.Host}
	}
	rraw, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	mems := make(map[string]admittedMember, len(a.Members))
	for m, e := range a.Members {
		mems[m] = admittedMember(e)
	}
	mraw, err := json.Marshal(mems)
	if err != nil {
		return err
	}
	nk, rk, mk := admissionKeys(s.Section)
	data := map[string]string{nk: string(raw), rk: string(rraw), mk: string(mraw)}
	maps.Copy(data, extra)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.name()}, Data: data}
	if a.Version == "" {
		err = s.Client.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kube: admissions: %w", remediation.ErrConflict)
		}
	} else {
		// Only our keys, compare-and-swap on the version read: the
		// ConfigMap's labels, annotations, owners and other keys stay.
		patch := make(map[string]any, len(data))
		for k, v := range data {
			patch[k] = v
		}
		err = s.Client.Patch(ctx, cm, casPatch(a.Version, map[string]any{"data": patch}))
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: admissions: %w", remediation.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("kube: admissions: %w", err)
	}
	return nil
}
