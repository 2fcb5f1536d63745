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
}

// RebootRecordList is a list of RebootRecords.
//
// +kubebuilder:object:root=true
type RebootRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RebootRecord `json:"items"`
}
