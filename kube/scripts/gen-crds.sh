#!/usr/bin/env bash
# Generates the CRDs the envtest tests install from the typed APIs this
# module compiles against (the pinned baremetal-operator/apis and
# cluster-api/api), with
# controller-gen from the module proxy, so that schema and Go types always
# match. Run from kube/: scripts/gen-crds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=testdata/crds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0 crd:allowDangerousTypes=true \
  paths=github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1 output:crd:dir="$tmp"
mkdir -p "$out"
cp "$tmp/metal3.io_baremetalhosts.yaml" "$out/"
go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0 crd \
  paths=sigs.k8s.io/cluster-api/api/core/v1beta2 output:crd:dir="$tmp/capi"
cp "$tmp/capi/cluster.x-k8s.io_machines.yaml" "$tmp/capi/cluster.x-k8s.io_machinehealthchecks.yaml" "$out/"
