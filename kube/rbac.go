package kube

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UncachedObjects are the kinds the controllers read by name from the API
// server, not through the manager's cache: a cache would list and watch
// every Node of the cluster and every ConfigMap of the namespace for the
// handful the remediation needs. Pass them as the manager's
// client.CacheOptions.DisableFor (the generated role grants no list or
// watch on them).
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Node{}, &corev1.ConfigMap{}}
}

// The permissions the controllers of this package need, as kubebuilder
// RBAC markers: scripts/gen-config.sh generates config/rbac/role.yaml from
// them (controller-gen v0.21.0), and the tests run the controllers as a
// user bound to exactly that role, so a missing permission fails a test.
// Namespaced rules go to a Role (kustomize sets its namespace, the
// BareMetalHosts' namespace); only Nodes, which have no namespace, need a
// ClusterRole.
//
// RebootController with RebootHosts and Powers: hosts read through the
// cache and patched; the controller's own records; Secrets with get only,
// never cached; events; the leader-election Lease.
//
// +kubebuilder:rbac:groups=metal3.io,namespace=system,resources=baremetalhosts,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=rebootkit.io,namespace=system,resources=rebootrecords,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,namespace=system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=get;create;update
//
// Powers reads the reboot-client admission policy and its binding (by
// name, with get) to tell whether a BMC changed during a reboot may be used.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,resourceNames=rebootkit-reboot-client,verbs=get
//
// RemediationController with Machines, Nodes and Admissions: Machines
// patched and, on escalation, deleted; their health checks read (the
// storm guard's scope); the admissions ConfigMap, by name (created once,
// then read and patched: no other ConfigMap is read); Nodes read by name,
// patched (taint, labels) and deleted, never listed or watched (the
// manager's client reads them, and ConfigMaps, from the API server:
// UncachedObjects).
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,namespace=system,resources=machines,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,namespace=system,resources=machinehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,resourceNames=rebootkit-remediation-admissions,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;patch;delete
