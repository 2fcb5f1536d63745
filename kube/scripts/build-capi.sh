#!/usr/bin/env bash
# Builds Cluster API's core manager (its MachineHealthCheck controller,
# with the Cluster, Machine and the other core controllers) from the Go
# module proxy (no binary download), once, into the user cache directory
# keyed by version, and prints the binary's path (its CRDs are in crds/
# beside it). The version is the one of sigs.k8s.io/cluster-api/api that
# this module pins. Its go.mod replaces sigs.k8s.io/cluster-api/api with
# its own directory, which a dependency's replaces cannot do: a throwaway
# module requires it with a replace of its own, so no dependency of the
# kube module changes.
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
  # Its CRDs, from the same module.
  mkdir -p "$dir/crds"
  cp "$(go env GOMODCACHE)/sigs.k8s.io/cluster-api@$capi/core/config/crd/bases/"*.yaml "$dir/crds/"
  chmod u+w "$dir/crds/"*.yaml
  mv "$dir/cluster-api-manager.tmp" "$dir/cluster-api-manager"
fi
echo "$dir/cluster-api-manager"
