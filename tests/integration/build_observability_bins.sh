#!/usr/bin/env bash
# Build the observability tier's back ends into a cache outside the repo; a no-op when they are there.
#
#   jaeger      github.com/jaegertracing/jaeger/cmd/jaeger       (JAEGER_VERSION): the all-in-one trace
#               back end (OTLP in, query API out) the tracing tests export to (tests/integration/jaeger.py)
#   promtool    github.com/prometheus/prometheus/cmd/promtool    (PROMETHEUS_VERSION): checks the chart's
#               PrometheusRule and the metrics' exposition
#
# Both come from the Go module proxy through `go`, each from a small wrapper module that requires it as a
# tool (as tests/cluster/build_bins.sh builds the control plane). Arguments name which to build (default
# both). Prints the bin directory on the last line.
set -euo pipefail

JAEGER_VERSION="${JAEGER_VERSION:-v1.76.0}"
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"

CACHE_ROOT="${AGENT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-engine}"
DIR="$CACHE_ROOT/observability"
BIN_DIR="$DIR/bin"
WORK_DIR="$DIR/work"

# Go's own installer puts it here; a non-login shell may not have it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="/usr/local/go/bin:$PATH"
# Never fetch a newer Go toolchain: build with the one installed.
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0

mkdir -p "$BIN_DIR"

# Which to build: the arguments (jaeger, promtool), or both. Already there: no lock, no go.
WANTED=("$@")
[[ ${#WANTED[@]} -gt 0 ]] || WANTED=(jaeger promtool)
version_of() { [[ "$1" == jaeger ]] && echo "$JAEGER_VERSION" || echo "$PROMETHEUS_VERSION"; }
missing=0
for name in "${WANTED[@]}"; do
    [[ "$name" == jaeger || "$name" == promtool ]] || { echo "unknown binary $name: jaeger or promtool" >&2; exit 2; }
    [[ -x "$BIN_DIR/$name-$(version_of "$name")" ]] || missing=1
done
if [[ $missing == 0 ]]; then
    for name in "${WANTED[@]}"; do ln -sf "$BIN_DIR/$name-$(version_of "$name")" "$BIN_DIR/$name"; done
    echo "$BIN_DIR"
    exit 0
fi

# Serialise concurrent builds (two test sessions, or make + pytest) on one lock in the cache.
exec 9>"$DIR/.build.lock"
flock 9

log() { printf '[observability-bins] %s\n' "$*" >&2; }

# build NAME MODULE PACKAGE VERSION: go build PACKAGE from a wrapper module requiring MODULE@VERSION.
build() {
    local name="$1" module="$2" package="$3" version="$4"
    local bin="$BIN_DIR/$name-$version"
    if [[ ! -x "$bin" ]]; then
        command -v go >/dev/null || { log "go is not on PATH: install Go 1.25 or newer, then run make observability-bins"; exit 1; }
        log "building $name $version"
        local dir="$WORK_DIR/$name"
        rm -rf "$dir"
        mkdir -p "$dir"
        printf 'module agentengine.invalid/observabilitybins\n\ngo 1.25.0\n' >"$dir/go.mod"
        (
            cd "$dir"
            go get -tool "$package@$version"
            go build -trimpath -ldflags "-s -w" -o "$bin.tmp" "$package"
        )
        mv "$bin.tmp" "$bin"
        rm -rf "$dir"
        log "$name ready at $bin"
    fi
    ln -sf "$bin" "$BIN_DIR/$name"
}

for name in "${WANTED[@]}"; do
    case "$name" in
        jaeger) build jaeger github.com/jaegertracing/jaeger github.com/jaegertracing/jaeger/cmd/jaeger "$JAEGER_VERSION" ;;
        promtool) build promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" ;;
    esac
done
echo "$BIN_DIR"
