#!/usr/bin/env bash
# Builds Cluster API's core manager (its MachineHealthCheck controller,
# with the Cluster, Machine and the other core controllers) from the Go
# module proxy (no binary download), once, into the user cache directory
# keyed by version, and prints the binary's path (its CRDs are in crds/
# beside it, its manager's ClusterRole in rbac/role.yaml). The version is
# the one of sigs.k8s.io/cluster-api/api that this module pins. Its
# go.mod replaces sigs.k8s.io/cluster-api/api with its own directory,
# which a dependency's replaces cannot do: a throwaway module requires it
# with a replace of its own, so no dependency of the kube module changes.
set -euo pipefail
capi=${CAPI_VERSION:-v1.14.2}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/rebootkit/capi-$capi
mkdir -p "$dir"
if [ ! -x "$dir/cluster-api-manager" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init rebootkit.local/capi >/dev/null 2>&1
    go mod edit -require "sigs.k8s.io/cluster-api@$capi" \
      -replace "sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@$capi"
    printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/cluster-api/core"\n' > tools.go
    go mod tidy >&2
    go build -o "$dir/cluster-api-manager.tmp" sigs.k8s.io/cluster-api/core
  ) >&2
  mv "$dir/cluster-api-manager.tmp" "$dir/cluster-api-manager"
fi
# Its CRDs and its manager's ClusterRole (generated from its markers),
# from the same module version.
if [ ! -f "$dir/rbac/role.yaml" ]; then
  src=$(go mod download -json "sigs.k8s.io/cluster-api@$capi" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$dir/crds" "$dir/rbac"
  cp "$src/core/config/crd/bases/"*.yaml "$dir/crds/"
  cp "$src/core/config/rbac/role.yaml" "$dir/rbac/role.yaml.tmp"
  chmod u+w "$dir/crds/"*.yaml "$dir/rbac/role.yaml.tmp"
  mv "$dir/rbac/role.yaml.tmp" "$dir/rbac/role.yaml"
fi
echo "$dir/cluster-api-manager"
