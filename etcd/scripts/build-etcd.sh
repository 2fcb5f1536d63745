#!/usr/bin/env bash
# Builds the etcd server binary of the pinned version from the Go module
# proxy (no binary download), once, into the user cache directory, and
# prints its path. `go install pkg@version` is refused for etcd (its go.mod
# has replace directives), so a throwaway tool module requires it.
set -euo pipefail
version=${ETCD_VERSION:-v3.7.3}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rebootkit/etcd-$version
bin=$cache/etcd
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && go mod init rebootkit.local/etcdtool >/dev/null 2>&1 \
    && go get -tool "go.etcd.io/etcd/server/v3@$version" >/dev/null 2>&1 \
    && go build -o "$bin.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
