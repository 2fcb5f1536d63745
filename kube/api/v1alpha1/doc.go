// Package v1alpha1 is rebootkit's own Kubernetes API (group rebootkit.io):
// RebootRecord, the reboot controller's state of one BareMetalHost. It is
// an object of the controller's own, so that the clients that may ask for
// reboots (update on BareMetalHosts) cannot write the fencing evidence:
// give them get, list and watch on rebootrecords, never more.
//
// +kubebuilder:object:generate=true
// +groupName=rebootkit.io
package v1alpha1
