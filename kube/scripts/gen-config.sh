#!/usr/bin/env bash
# Generates, with controller-gen v0.21.0 from the module proxy, what
# kubebuilder projects generate from markers: the rebootkit.io CRDs
# (config/crd/bases), its deep-copy functions, and the controller's role
# (config/rbac/role.yaml, from the +kubebuilder:rbac markers in rbac.go).
# Run from kube/: scripts/gen-config.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cg="go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0"
$cg object paths=./api/...
$cg crd paths=./api/... output:crd:dir=config/crd/bases
$cg rbac:roleName=rebootkit-controller paths=./ output:rbac:dir=config/rbac
