package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is rebootkit.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "rebootkit.io", Version: "v1alpha1"}

// AddToScheme adds the types of this package to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &RebootRecord{}, &RebootRecordList{},
		&PowerCycleRemediation{}, &PowerCycleRemediationList{},
		&PowerCycleRemediationTemplate{}, &PowerCycleRemediationTemplateList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// RebootRecord is the reboot controller's record of one BareMetalHost of
// the same name and namespace: the reboot package's Status (the fencing
// evidence among it). Only the controller writes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rbr
// +kubebuilder:printcolumn:name="Host UID",type=string,JSONPath=`.spec.hostUID`
type RebootRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RebootRecordSpec `json:"spec,omitempty"`
}

// RebootRecordSpec is the record.
type RebootRecordSpec struct {
	// HostUID is the UID of the BareMetalHost the record belongs to: a host
	// deleted and created again under the same name starts afresh.
	HostUID string `json:"hostUID"`
	// Status is the reboot package's Status of the host, as JSON.
	Status string `json:"status"`
	// BMC is the host's BMC as it was when the controller first saw the
	// pending reboot (nil while none is pending): the controller sends no
	// credentials to, and takes no evidence from, another one during that
	// reboot unless the reboot-client admission policy has been in force
	// since before it (kube.Powers).
	// +optional
	BMC *BMCPin `json:"bmc,omitempty"`
	// BMCChanged is the pin that was in force when the controller found
	// the host's requests gone and its spec.bmc no longer the pinned one
	// (a reboot client may have removed its request and redirected the BMC
	// in one write). While it is set and spec.bmc is not the BMC it
	// names, the controller sends the host's BMC no credentials and takes
	// no evidence from it (kube.ErrBMCChanged). An identity with more than
	// the reboot-client role accepts the new BMC by naming it here
	// (address, credentialsName; reboot clients may not write
	// RebootRecords); when spec.bmc is the BMC named (accepted or
	// restored), the controller makes this the pin again (BMC) and removes
	// it. A mark with no address is that of a pending reboot whose pin was
	// missing.
	// +optional
	BMCChanged *BMCPin `json:"bmcChanged,omitempty"`
	// LastBMC is the host's spec.bmc as the controller last used it or
	// first saw it (its pendingSince: when it was recorded), kept when no
	// reboot is pending: a spec.bmc other than this one is used only if
	// the reboot-client admission policy has been in force since before
	// that time; otherwise the record is marked BMCChanged with it and the
	// host is not acted on until an identity with more than the
	// reboot-client role accepts the new BMC there (or spec.bmc is
	// restored).
	// +optional
	LastBMC *BMCPin `json:"lastBMC,omitempty"`
	// PowerOnThrough is set, with BMCChanged, when the pinned BMC read Off
	// after the host's requests were removed with its BMC changed: the
	// withdrawn reboot may have powered the host off, and the controller
	// still owes it a power-on through this BMC (the pinned one, never the
	// new one). Passes retry that power-on, with back-off, while
	// spec.online is true, the host is not being deprovisioned and it
	// carries no reboot request (the rule by which the reboot package
	// powers a host on), until a reading through this BMC begun StaleReads
	// after the call reads On; then it is removed. Accepting or restoring
	// the BMC removes it (the reboot package then powers the host as
	// spec.online says).
	// +optional
	PowerOnThrough *BMCPin `json:"powerOnThrough,omitempty"`
	// PowerOnSent is written, in a compare-and-swap on the record read
	// just before, each time the power-on owed through PowerOnThrough is
	// about to be sent, after the BMC's last answer before the command:
	// that power-on may land on the host until its Until (the call's
	// deadline). It is kept when PowerOnThrough is removed (the BMC
	// restored or accepted) and by every other write but the one of a
	// host of the same name created afresh, so that every replica, this
	// one after a restart and a new leader alike, sends the host nothing
	// and takes no evidence from it until StaleReads after Until
	// (kube.ErrInFlight); past that it changes nothing, unless it names
	// a Task (below). It is also written just before a command of the
	// normal path that may power the host on (a power-on, a restart, a
	// press of the power button) is sent (kube.Async), Until the call's
	// deadline plus the task limit, and then removed once the BMC
	// answered, Until shortened if no answer came, or Task added if the
	// BMC accepted it for later. Each writing replaces the whole of it.
	// +optional
	PowerOnSent *PowerOnSent `json:"powerOnSent,omitempty"`
}

// PowerOnSent is a power-on through a pinned BMC that was about to be
// sent, or a command of the normal path that may power the host on
// (RebootRecordSpec.PowerOnSent).
type PowerOnSent struct {
	// Address is the BMC the command was sent through (the address of
	// PowerOnThrough, or the host's spec.bmc.address).
	Address string `json:"address"`
	// At is when it was about to be sent, and Until the latest instant
	// its call may still reach the BMC (RFC 3339 with nanoseconds, the
	// sending controller's clock).
	At    string `json:"at"`
	Until string `json:"until"`
	// Returned, if set, is when the call returned with the BMC's answer
	// (the On landed or was refused by then), written by the sending
	// controller after it, or by any controller that read the task
	// ended (Task): the wait ends StaleReads after it (one before At is
	// an earlier sending's, and ignored). A call with no answer sets
	// none; one the BMC accepted for later (a Redfish 202 Accepted: it
	// may still land) sets it only once its task ended or the host read
	// On.
	// +optional
	Returned string `json:"returned,omitempty"`
	// Task, if set, says that the BMC accepted the On for later (a
	// Redfish 202 Accepted): its task monitor's path on that BMC, or
	// "(none named)". The sending controller writes it with Until moved
	// to the end of its wait for the task (Async's DefaultTaskLimit
	// after the answer); past Until with no Returned, the host is left
	// as it is until a controller reads that task monitor ended or gone
	// (then it sets Returned), or an administrator removes PowerOnSent.
	// +optional
	Task string `json:"task,omitempty"`
}

// BMCPin is a BareMetalHost's spec.bmc as the controller saw it when a
// reboot became pending.
type BMCPin struct {
	// Address is spec.bmc.address.
	Address string `json:"address"`
	// CredentialsName is spec.bmc.credentialsName.
	CredentialsName string `json:"credentialsName"`
	// DisableCertificateVerification is spec.bmc.disableCertificateVerification.
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
	// PendingSince is the reboot's PendingRebootSince (RFC 3339 with
	// nanoseconds, the controller's clock): the pin belongs to that reboot.
	PendingSince string `json:"pendingSince"`
}

// RebootRecordList is a list of RebootRecords.
//
// +kubebuilder:object:root=true
type RebootRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RebootRecord `json:"items"`
}
