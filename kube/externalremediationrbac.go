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
// +kubebuilder:rbac:groups=rebootkit.io,namespace=system,resources=powercycleremediations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=rebootkit.io,namespace=system,resources=powercycleremediations/status,verbs=get;patch
