package kube

// The permissions ExternalRemediationController needs beyond rbac.go's,
// as kubebuilder RBAC markers (scripts/gen-config.sh puts them in
// config/rbac/role.yaml): its remediations read through the cache, their
// finalizer patched, their status patched. It reads Machines and Nodes,
// deletes or taints Nodes, writes the admissions ConfigMap and asks for
// reboots through the BareMetalHosts' annotations with rbac.go's rules.
// The health checkers' own rights (create and delete remediations, read
// templates) are config/rbac/external_remediation_checker_role.yaml, an
// aggregated ClusterRole.
//
// The storm guard of the external remediation counts the cluster's Nodes
// with one uncached List per pass (Nodes are not cached: UncachedObjects),
// so the role lists Nodes, without watch.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,resourceNames=rebootkit-external-remediation-admissions,verbs=get;patch
// +kubebuilder:rbac:groups=rebootkit.io,namespace=system,resources=powercycleremediations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=rebootkit.io,namespace=system,resources=powercycleremediations/status,verbs=get;patch
