// Package kube runs rebootkit's reboot state machine on real Kubernetes
// objects: the reboot API's annotations (reboot.metal3.io,
// reboot.metal3.io/{key}) on metal3 BareMetalHosts, with controller-runtime.
// It is its own Go module (github.com/rebootkit/rebootkit/kube) so that
// importing the core stays light; its types come from
// github.com/metal3-io/baremetal-operator/apis v0.13.2 and it builds with
// sigs.k8s.io/controller-runtime v0.25.2.
//
// What is here:
//
//   - RebootHosts, a reboot.HostStore over the BareMetalHosts of a
//     namespace: the annotations, spec.online, and the provisioning state
//     (deprovisioning, powering off before delete, deleting, or a deletion
//     timestamp count as deprovisioned). The reboot package's Status lives
//     in the annotation StatusAnnotation, written in the same update as the
//     removal of the reboot annotations, which is what makes the seed's
//     "atomic" promise hold: a status field would be a second write to the
//     status subresource, which the baremetal-operator owns. Every write
//     carries the resourceVersion read: the API server's conflict is
//     reboot.ErrConflict, not-found reboot.ErrNotFound.
//   - RebootController: SetupWithManager watches BareMetalHosts with a
//     predicate that passes annotation-only updates (they do not bump the
//     generation, so GenerationChangedPredicate alone would never see a
//     reboot request), requeues when the decision asks, retries at once on
//     a conflict, and turns the decisions' warnings into events.
//   - Powers: a power.Controller per host from its spec.bmc address (the
//     Redfish family or IPMI, ParseBMCAddress) and credentials Secret.
//   - Nodes, a remediation.NodeStore over core Nodes (readiness, the
//     out-of-service taint, labels and annotations added only where
//     missing, deletion), every change retried from a fresh read on a
//     conflict; Admissions, the remediation storm guard's shared record as
//     a compare-and-swap on one ConfigMap.
//
// Tests run against a real API server (envtest with kube-apiserver
// v1.37.1 and etcd v3.7.3 built from the Go module proxy by
// scripts/build-envtest.sh) and the BareMetalHost CRD generated from the
// typed API by scripts/gen-crds.sh (controller-gen v0.21.0): generated
// rather than copied so that the schema always matches the Go types this
// module compiles against.
//
// # The caller's duties
//
//   - One RebootController per namespace and per host at a time: the
//     reboot Reconciler must not reconcile one host from two goroutines
//     (controller-runtime's work queue guarantees it within one manager;
//     run managers with leader election so that only one is active).
//   - Give the controller's service account update on baremetalhosts and
//     get on the BMC Secrets.
//
// cmd/rebootkit-controller is a manager binary running the reboot
// controller (flags for kubeconfig, namespace, leader election, BMC CA).
//
//   - Machines, a remediation.MachineStore over Cluster API core/v1beta2
//     Machines (the remediation mark, control-plane label, controller
//     owner, nodeRef; the State in an annotation saved with
//     compare-and-swap), and HostOfMachine (the BareMetalHost whose
//     consumerRef is the Machine's Metal3Machine).
//
//   - RemediationController and NewRemediationReconciler: the remediation
//     Reconciler on the namespace's Machines with the stores above (run it
//     with the RebootController: the hosts' power goes through the reboot
//     API). The storm guard's admission is a compare-and-swap on the
//     Admissions ConfigMap, so concurrent reconciles and managers admit at
//     most the limit.
//
//   - ReuseHosts, a nodereuse.HostStore over BareMetalHosts (reuse label,
//     provisioning state, consumer reference, deletion, error, paused or
//     detached, capm3.metal3.io/unhealthy, failure domain); claims and
//     label changes are updates with the resourceVersion listed, so two
//     machines never get one host.
package kube
