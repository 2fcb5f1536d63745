#!/usr/bin/env bash
# Builds the envtest binaries from the Go module proxy (no binary
# download), once, into the user cache directory keyed by version, and
# prints the directory (for KUBEBUILDER_ASSETS): kube-apiserver from
# k8s.io/kubernetes (a throwaway module that requires it with a replace for
# every staging module, as its own go.mod has them), and etcd (see
# etcd/scripts/build-etcd.sh). The apiserver takes about 700 CPU-seconds
# and 2.3 GiB the first time.
set -euo pipefail
k8s=${KUBE_VERSION:-v1.37.1}
staging=${KUBE_STAGING_VERSION:-v0.${k8s#v1.}}
etcdv=${ETCD_VERSION:-v3.7.3}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/rebootkit/envtest-$k8s-etcd-$etcdv
mkdir -p "$dir"
if [ ! -x "$dir/kube-apiserver" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init rebootkit.local/apiserver >/dev/null 2>&1
    modfile=$(go mod download -json "k8s.io/kubernetes@$k8s" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    for m in $(grep '=> ./staging' "$modfile" | awk '{print $1}'); do
      go mod edit -replace "$m=$m@$staging"
    done
    go mod edit -require "k8s.io/kubernetes@$k8s"
    printf 'package main\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\nfunc main() {}\n' > tools.go
    go mod tidy >/dev/null 2>&1 || true
    go build -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  )
  mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
fi
if [ ! -x "$dir/etcd" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  cp "$(ETCD_VERSION=$etcdv "$here/../../etcd/scripts/build-etcd.sh")" "$dir/etcd"
fi
echo "$dir"
