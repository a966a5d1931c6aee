#!/usr/bin/env bash
# Build FerretDB v1 (the MongoDB wire protocol over SQLite) into a cache outside the repo; a no-op when it is
# there. The integration tests run the OE's MongoStore against it (tests/integration/ferretdb.py).
#
#   ferretdb    github.com/FerretDB/FerretDB/cmd/ferretdb    (FERRETDB_VERSION)
#
# It comes from the Go module proxy through `go`. FerretDB's version package panics unless the generated
# build/version/version.txt is embedded, and a module download lacks it (a wrapper module does not help:
# the build info names the module of package main), so the module's source is copied, given that file, and
# built as the main module.
# Prints the binary's path on the last line of stdout.
set -euo pipefail

FERRETDB_VERSION="${FERRETDB_VERSION:-v1.24.2}"

CACHE_ROOT="${AGENT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-engine}"
DIR="$CACHE_ROOT/ferretdb-$FERRETDB_VERSION"
BIN="$DIR/ferretdb"
WORK_DIR="$DIR/work"

# Go's own installer puts it here; a non-login shell may not have it on PATH.
command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="/usr/local/go/bin:$PATH"
# Never fetch a newer Go toolchain: build with the one installed.
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0

mkdir -p "$DIR"

# Serialise concurrent builds (two test sessions, or make + pytest) on one lock in the cache.
exec 9>"$DIR/.build.lock"
flock 9

if [[ ! -x "$BIN" ]]; then
    log() { printf '[ferretdb-bin] %s\n' "$*" >&2; }
    command -v go >/dev/null || { log "go is not on PATH: install Go 1.24 or newer, then run make ferretdb-bin"; exit 1; }
    log "building ferretdb $FERRETDB_VERSION"
    rm -rf "$WORK_DIR"
    mkdir -p "$WORK_DIR"
    local_src="$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -f "$local_src/go.mod" ]] || { log "go mod download gave no source directory"; exit 1; }
    cp -R "$local_src/." "$WORK_DIR/src"
    chmod -R u+w "$WORK_DIR/src"
    printf '%s\n' "$FERRETDB_VERSION" >"$WORK_DIR/src/build/version/version.txt"
    (
        cd "$WORK_DIR/src"
        go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" ./cmd/ferretdb
    )
    mv "$BIN.tmp" "$BIN"
    rm -rf "$WORK_DIR"
    log "ferretdb ready at $BIN"
fi
echo "$BIN"
