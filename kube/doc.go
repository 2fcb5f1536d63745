// Package kube runs rebootkit's state machines on real Kubernetes objects:
// the reboot API's annotations (reboot.metal3.io, reboot.metal3.io/{key})
// on metal3 BareMetalHosts, remediation of Cluster API Machines and their
// Nodes, and node reuse of BareMetalHosts, with controller-runtime. It is
// its own Go module (github.com/rebootkit/rebootkit/kube) so that
// importing the core stays light; its types come from
// github.com/metal3-io/baremetal-operator/apis v0.13.2 and
// sigs.k8s.io/cluster-api/api v1.14.2 (core/v1beta2), and it builds with
// sigs.k8s.io/controller-runtime v0.25.2.
//
// Stores (every write carries the resourceVersion read; the API server's
// conflict is the package's ErrConflict, not-found its ErrNotFound):
//
//   - RebootHosts, a reboot.HostStore over the BareMetalHosts of a
//     namespace: the annotations, spec.online, and the provisioning state
//     (deprovisioning, powering off before delete, deleting, or a deletion
//     timestamp count as deprovisioned). The reboot package's Status lives
//     in the annotation StatusAnnotation, written in the same update as the
//     removal of the reboot annotations, which is what makes the seed's
//     "atomic" promise hold: a status field would be a second write to the
//     status subresource, which the baremetal-operator owns.
//   - Machines, a remediation.MachineStore over Cluster API Machines (the
//     remediation mark, control-plane label, controller owner, nodeRef;
//     the State in an annotation saved with compare-and-swap), and
//     HostOfMachine (the BareMetalHost whose consumerRef is the Machine's
//     Metal3Machine).
//   - Nodes, a remediation.NodeStore over core Nodes (readiness, the
//     out-of-service taint, labels and annotations added only where
//     missing, deletion), every change retried from a fresh read on a
//     conflict; Admissions, the remediation storm guard's shared record as
//     a compare-and-swap on one ConfigMap.
//   - ReuseHosts, a nodereuse.HostStore over BareMetalHosts (reuse label,
//     provisioning state, consumer reference, deletion, error, paused or
//     detached, capm3.metal3.io/unhealthy, failure domain); claims and
//     label changes are updates with the resourceVersion listed, so two
//     machines never get one host.
//
// Controllers:
//
//   - RebootController: watches BareMetalHosts with a predicate that
//     passes annotation-only updates (they do not bump the generation, so
//     GenerationChangedPredicate alone would never see a reboot request),
//     requeues when the decision asks, retries at once on a conflict, and
//     turns the decisions' warnings into events.
//   - RemediationController and NewRemediationReconciler: the remediation
//     Reconciler on the namespace's Machines with the stores above; run it
//     with the RebootController (the hosts' power goes through the reboot
//     API).
//   - Powers: a power.Controller per host from its spec.bmc address (the
//     Redfish family or IPMI, ParseBMCAddress) and credentials Secret.
//   - cmd/rebootkit-controller: a manager binary running both controllers
//     (kubeconfig, namespace, leader election on by default, BMC CA,
//     storm-guard limit).
//
// Tests run against a real API server (envtest with kube-apiserver
// v1.37.1 and etcd v3.7.3 built from the Go module proxy by
// scripts/build-envtest.sh) with the BareMetalHost and Machine CRDs
// generated from the typed APIs by scripts/gen-crds.sh (controller-gen
// v0.21.0): generated rather than copied so that the schemas always match
// the Go types this module compiles against.
//
// # The caller's duties
//
//   - One active manager (leader election, on by default in the binary):
//     the reboot Reconciler must not reconcile one host from two
//     goroutines, which controller-runtime's work queue guarantees within
//     one manager only.
//   - Give the controller's service account update on baremetalhosts,
//     machines, nodes and the admissions ConfigMap, delete on machines and
//     nodes, and get on the BMC Secrets.
//
// # Guarantees
//
//   - The reboot status and the removal of the reboot annotations are one
//     write; no store write overwrites a change it did not read.
//   - The storm guard admits at most its limit across concurrent
//     reconciles and managers (compare-and-swap on the Admissions record).
//   - A host claimed for node reuse goes to one machine.
package kube
