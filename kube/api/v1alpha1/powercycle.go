package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Remediation strategies of PowerCycleRemediationSpec.Strategy, with the
// names Self Node Remediation uses.
const (
	// StrategyResourceDeletion deletes the Node while its host is known
	// off (the default).
	StrategyResourceDeletion = "ResourceDeletion"
	// StrategyOutOfServiceTaint taints the Node
	// node.kubernetes.io/out-of-service (NoExecute) while its host is
	// known off, for clusters with non-graceful node shutdown.
	StrategyOutOfServiceTaint = "OutOfServiceTaint"
)

// Condition types of PowerCycleRemediationStatus.Conditions, as medik8s's
// NodeHealthCheck reads them.
const (
	// ConditionProcessing is True while rebootkit works on the host (or
	// still holds it off), False once it let go of it.
	ConditionProcessing = "Processing"
	// ConditionSucceeded is True once the host was power-cycled and the
	// Node is back and Ready, False once the remediation failed or was
	// cancelled and the host is released; Unknown before.
	ConditionSucceeded = "Succeeded"
	// ConditionPermanentNodeDeletionExpected is True from the start of an
	// attempt that deletes the Node (strategy ResourceDeletion) and, after
	// it, while the Node it deleted has not registered again; False
	// otherwise. NodeHealthCheck deletes a remediation whose Node is gone
	// unless it is True (and Succeeded is not), so the remediation lives
	// on while its Node is deleted.
	ConditionPermanentNodeDeletionExpected = "PermanentNodeDeletionExpected"
)

// TimedOutAnnotation is what NodeHealthCheck puts on a remediation whose
// escalation step timed out: rebootkit then releases the host (cancels)
// and reports Processing False.
const TimedOutAnnotation = "remediation.medik8s.io/nhc-timed-out"

// NodeNameAnnotation is where NodeHealthCheck names the Node when the
// remediation's name is not the Node's.
const NodeNameAnnotation = "remediation.medik8s.io/node-name"

// PowerCycleRemediationSpec is the remediation's knobs, copied from the
// template by the health checker.
type PowerCycleRemediationSpec struct {
	// Mode is "hard" (the default: power off at once) or "soft" (a
	// graceful shutdown first, then hard after the reboot controller's
	// soft timeout).
	// +kubebuilder:validation:Enum=hard;soft
	// +optional
	Mode string `json:"mode,omitempty"`
	// Timeout bounds one attempt, from its start to the Node being back
	// and Ready (default 10m).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// RetryLimit is how many more power cycles may follow the first when
	// an attempt times out (default 1; 0: none).
	// +kubebuilder:validation:Minimum=0
	// +optional
	RetryLimit *int32 `json:"retryLimit,omitempty"`
	// Strategy is how the Node is fenced while its host is known off:
	// ResourceDeletion (default) or OutOfServiceTaint.
	// +kubebuilder:validation:Enum=ResourceDeletion;OutOfServiceTaint
	// +optional
	Strategy string `json:"strategy,omitempty"`
	// HostMapping tells which BareMetalHost a Node runs on where there is
	// no Cluster API Machine owning the remediation.
	// +optional
	HostMapping *HostMapping `json:"hostMapping,omitempty"`
}

// HostMapping maps a Node to the BareMetalHost (in the remediation's
// namespace) it runs on: Hosts first, then the BareMetalHost whose
// HostAnnotation names the Node, then the Node's Label. Only what the
// Node's kubelet cannot write is trusted: a kubelet may set any
// annotation and most labels on its own Node, and a Node that names
// another server's host would have that server powered off and itself
// deleted while it runs. So Label must be in the
// node-restriction.kubernetes.io domain (or a subdomain of it), which the
// NodeRestriction admission plugin forbids kubelets to set; another key
// is refused (the remediation fails with NoHost, saying so). Where the
// BareMetalHost side and the Label both name a host and disagree, the
// remediation fails with NoHost. Whatever the keys named here, the host
// found (Hosts included) is cross-checked under rebootkit's default keys
// too (the BareMetalHost annotation rebootkit.io/node, the Node label
// node-restriction.kubernetes.io/baremetalhost) and the controller's:
// a host whose annotation names another Node, another host's naming
// this Node, or the Node's label naming another host fails it with
// NoHost.
type HostMapping struct {
	// Label is a label key of the Node whose value is the host's name,
	// in the node-restriction.kubernetes.io domain (for example
	// node-restriction.kubernetes.io/baremetalhost).
	// +optional
	Label string `json:"label,omitempty"`
	// HostAnnotation is an annotation key of the BareMetalHosts whose
	// value is the name of the Node the host runs (exactly one host may
	// name a Node).
	// +optional
	HostAnnotation string `json:"hostAnnotation,omitempty"`
	// Hosts maps Node names to host names. The health checker writes
	// the remediation's spec, so an entry is used only where the host's
	// annotation (rebootkit.io/node, the controller's keys or
	// HostAnnotation) names the Node, the Node's label in the
	// node-restriction.kubernetes.io domain names the host, or the
	// controller's own map (its --hosts flag) agrees; otherwise NoHost.
	// +optional
	Hosts map[string]string `json:"hosts,omitempty"`
}

// PowerCycleRemediationStatus is what the health checkers and people
// read.
type PowerCycleRemediationStatus struct {
	// Phase is the remediation's phase: power-off-requested, node-deleted,
	// powering-on, waiting-for-node, done, failed (empty: not started).
	// +optional
	Phase string `json:"phase,omitempty"`
	// RetryCount is the number of power cycles after the first.
	// +optional
	RetryCount int32 `json:"retryCount,omitempty"`
	// LastRemediated is when the current attempt started.
	// +optional
	LastRemediated *metav1.Time `json:"lastRemediated,omitempty"`
	// Host is the BareMetalHost being power-cycled.
	// +optional
	Host string `json:"host,omitempty"`
	// NodeName is the Node remediated, recorded with Host when the host
	// is found and never changed after: a remediation whose checker later
	// names another Node (its node-name annotation, or its owning
	// Machine's Node) is cancelled, and that Node is never acted on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Source records, with Host, where the Node came from when the host
	// was found: the owning Machine (name and UID), or the Node the
	// checker named (node-name annotation, else the object's name). A
	// checker that later names another source (another owner, or an
	// annotation instead of an owner) cancels the remediation; a Machine
	// whose Node registers later is read by this name and UID only.
	// +optional
	Source HostSource `json:"source,omitempty"`
	// ControlPlane records, with Host, whether the Node (or its Machine)
	// was a control-plane one when the host was found: the storm guard
	// remediates one control-plane host at a time, and reads this rather
	// than the Node, which rebootkit deletes mid-way. Unset in
	// remediations recorded by an earlier version: the Node's label is
	// read then, and a Node that is gone counts as control plane.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// Message says why the remediation waits, or what it could not do.
	// +optional
	Message string `json:"message,omitempty"`
	// State is the remediation package's persisted State, as JSON: the
	// controller's own bookkeeping.
	// +optional
	State string `json:"state,omitempty"`
	// Conditions: Processing, Succeeded, PermanentNodeDeletionExpected.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HostSource is where a remediation's host was found: its owning
// Cluster API Machine, or the Node its checker named.
type HostSource struct {
	// Machine is the name of the owning Machine ("" if none).
	// +optional
	Machine string `json:"machine,omitempty"`
	// MachineUID is the owning Machine's UID.
	// +optional
	MachineUID types.UID `json:"machineUID,omitempty"`
	// Node is the Node the checker named, without an owning Machine.
	// +optional
	Node string `json:"node,omitempty"`
}

// PowerCycleRemediation asks rebootkit to power-cycle the host of one
// Node (NodeHealthCheck: named after the Node) or one Machine (Cluster
// API's MachineHealthCheck: named after the Machine, owned by it).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pcr
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.host`
// +kubebuilder:printcolumn:name="Retries",type=integer,JSONPath=`.status.retryCount`
type PowerCycleRemediation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PowerCycleRemediationSpec   `json:"spec,omitempty"`
	Status PowerCycleRemediationStatus `json:"status,omitempty"`
}

// PowerCycleRemediationList is a list of PowerCycleRemediations.
//
// +kubebuilder:object:root=true
type PowerCycleRemediationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PowerCycleRemediation `json:"items"`
}

// PowerCycleRemediationTemplateResource is the template's object: its
// spec is copied into each remediation.
type PowerCycleRemediationTemplateResource struct {
	// Spec of the remediations made from the template.
	Spec PowerCycleRemediationSpec `json:"spec"`
}

// PowerCycleRemediationTemplateSpec holds the template.
type PowerCycleRemediationTemplateSpec struct {
	// Template is copied by the health checker into each remediation.
	Template PowerCycleRemediationTemplateResource `json:"template"`
}

// PowerCycleRemediationTemplate is what a MachineHealthCheck's
// spec.remediation.templateRef or a NodeHealthCheck's remediationTemplate
// (or escalatingRemediations step) names.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pcrt
type PowerCycleRemediationTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PowerCycleRemediationTemplateSpec `json:"spec,omitempty"`
}

// PowerCycleRemediationTemplateList is a list of templates.
//
// +kubebuilder:object:root=true
type PowerCycleRemediationTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PowerCycleRemediationTemplate `json:"items"`
}
