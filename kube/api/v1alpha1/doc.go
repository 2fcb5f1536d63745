// Package v1alpha1 is rebootkit's own Kubernetes API (group rebootkit.io):
// RebootRecord, the reboot controller's state of one BareMetalHost. It is
// an object of the controller's own, so that the clients that may ask for
// reboots (update on BareMetalHosts) cannot write the fencing evidence:
// give them get, list and watch on rebootrecords, never more.
//
// PowerCycleRemediation and PowerCycleRemediationTemplate plug rebootkit's
// phased power-cycle into Cluster API's MachineHealthCheck (external
// remediation through spec.remediation.templateRef) and medik8s's
// NodeHealthCheck (remediationTemplate or escalatingRemediations): the
// checker creates one remediation per unhealthy Machine or Node from the
// template's spec.template, and deletes it when the Node is healthy.
//
// +kubebuilder:object:generate=true
// +groupName=rebootkit.io
package v1alpha1
